#!/usr/bin/env bash
# The applier's learned fallback (issue 36) trained on a GPU machine: the one prepared run for
# the device tool (its README: one short script a call, files back under $OUT, at most 8 files
# of 16 MiB). Nothing of the project is imported there: specialists/lm_recipe.py runs as a
# script on the machine's own python3 (torch, transformers, tokenizers).
#
# Here, first (CPU, a few minutes; the examples of the training projects only):
#   .venv/bin/python -m specialists.apply.train_fallback --write-examples runs/fallback_examples.jsonl.gz
# Then, through the device tool, carrying the examples:
#   run(command="bash benchmarks/device_fallback.sh", carry=["runs/fallback_examples.jsonl.gz"], timeout_s=600)
# Back here, from the folder the files came back to:
#   cat FILES_AT/fallback.tgz.part-* | tar xzf - -C runs/apply_fallback_gpu
#   .venv/bin/python benchmarks/apply.py ../shared/data/commits/{attrs,click,flask,httpx,rich}.jsonl.gz \
#       --per-project 20 --generator both --fallback runs/apply_fallback_gpu      # dev first
#
# MINUTES (default 7) is the training budget: the command must end inside the tool's 10-minute
# limit with the tokenizer, the encoding and the archive around it. SHAPE overrides the model's
# flags; DEVICE (default cuda) and PYTHON (default python3) let the test run it on a CPU.
set -euo pipefail
EXAMPLES=${1:-runs/fallback_examples.jsonl.gz}
MINUTES=${MINUTES:-7}
SHAPE=${SHAPE:---n-embd 256 --n-layer 6 --n-head 8 --n-positions 1024 --batch-size 128 --lr 1e-3 --warmup-steps 200}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
DEST=${OUT:-runs/device_out}
WORK=$(mktemp -d)
mkdir -p "$DEST"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ ! -s "$EXAMPLES" ]; then
    echo "no examples at $EXAMPLES: cut them first (see the top of this file) and carry them" >&2
    exit 2
fi
{ nvidia-smi -L || true; "$PYTHON" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__)"; } 2>&1 | tee "$DEST/machine.txt"
# shellcheck disable=SC2086  # SHAPE is a list of flags
"$PYTHON" specialists/lm_recipe.py --examples "$EXAMPLES" --out "$WORK/model" --device "$DEVICE" \
    --minutes "$MINUTES" --eval-every 250 --val-examples 400 --threads 8 $SHAPE 2>&1 | tee "$DEST/train.log"
cp "$WORK/model/train.json" "$DEST/train.json"
tar czf - -C "$WORK/model" . | split -b 15M - "$DEST/fallback.tgz.part-"
ls -l "$DEST"
