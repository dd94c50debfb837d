"""Owns the coach's check-ins: reading the scheduling answers into a schedule (`cadence`), the
schedule kept in EventBridge Scheduler (`timetable`), and a check-in written from the memory,
stored and delivered (`outreach`). The check-in's agent is beside the onboarding agents
(`agents/check_in.py`); decision 0035.
"""
