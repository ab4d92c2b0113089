"""The online learning loop: serve → log on-policy → learn from feedback → gate → hot swap.

``versions`` keeps every policy version with its lineage and the pointers to the deployed
one and to a canary; ``trainer`` turns the deployed version's labelled events into the next
version; ``gate`` decides whether it ships (held-out replays, logged events, and a canary's
live arms); ``simulate`` drives the real HTTP API with simulated users; ``runner`` runs
whole simulated turns and ``live`` the turns against a running server (``complement loop``).
"""
