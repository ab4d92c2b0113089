"""The online learning loop: serve → log on-policy → learn from feedback → gate → hot swap.

``versions`` keeps every policy version with its lineage and the pointer to the deployed
one; ``trainer`` turns the deployed version's labelled events into the next version;
``gate`` replays held-out edits to decide whether it ships; ``simulate`` drives the real
HTTP API with simulated users; ``runner`` runs whole turns (``complement loop``).
"""
