"""Owns the SMS channel: what a text asks for (`inbound`), what the webhook does with it (`intake`),
the sealed queue of turns to answer (`queue`, `sealing`), answering them (`responder`), and
sending the replies (`sender`, `split`). It reaches the table only through the services.

Nothing here knows Twilio's webhook event shape; the webhook handler turns it into `InboundSms`.
"""
