"""Owns everything the model reads and how it is called: the Bedrock chat model and its stream's
retries (`bedrock`), Converse normalisation (`converse`), the system prompt (`prompt`, its parts and
the memory's sections in `sections`), every text of ours (`wording`), the tools and the working
copy they change (`tools`, `working_copy`), and the event-stream framing (`event_stream`). The
agents, whose names the onboarding design fixes, live in `onboarding.agents` and build on these.
"""
