"""Owns the SMS channel: what a text asks for, the queue of turns to answer, and sending the replies.

Nothing here knows Twilio's webhook event shape; the webhook handler turns it into `InboundSms`.
"""
