"""The shipped checkpoint: small enough, documented, loads, answers."""

from __future__ import annotations

from specialists.tab.specialist import DEFAULT_CHECKPOINT


def test_checkpoint_size_and_card() -> None:
    total = sum(p.stat().st_size for p in DEFAULT_CHECKPOINT.iterdir() if p.is_file())
    assert total < 25 * 1024 * 1024
    card = (DEFAULT_CHECKPOINT / "MODEL_CARD.md").read_text()
    assert "complement tab pretrain" in card and "complement tab train" in card


def test_shipped_specialist_answers() -> None:
    from specialists.tab import TabSpecialist

    spec = TabSpecialist()
    spec.setup()
    # the LM reads as many tokens as the policy was trained on: its features depend on it
    assert spec.lm.context_tokens == spec.policy.trained_with["context_tokens"] == 64
    file = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return w * h"
    result = spec.answer({"file": file, "cursor": len(file), "language": "python"})
    assert result.meta["policy_version"] == spec.policy.version > 0
    assert result.meta["latency_ms"] > 0
    assert spec.health()["ok"]
