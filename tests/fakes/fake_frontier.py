"""The fake frontier the tests script is the product's demo provider
(``router/demo_provider.py``, issue 40); this name stays for the tests that import it here."""

from router.demo_provider import FakeFrontier, answer_text, usage

__all__ = ["FakeFrontier", "answer_text", "usage"]
