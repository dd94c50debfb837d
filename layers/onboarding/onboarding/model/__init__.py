"""Owns the domain's types: messages, onboarding state, profile, answers, the stored conversation
(`history`), users and their phones (`users`), the text rules every channel shares (`text`), and
every domain error.

Nothing here does I/O or imports LangChain or boto3, so every layer (and the SMS webhook's cold
path) can use the same types.
"""
