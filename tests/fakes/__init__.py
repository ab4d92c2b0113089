"""Fakes for the outside world (provider APIs) only; never for our own components."""
