"""Conversation memory for the fitness coach's onboarding agents.

The library knows nothing of API Gateway, Twilio or any other event shape: handlers translate
their events into calls on `onboarding.turn.service.TurnService` and its results into responses.
"""
