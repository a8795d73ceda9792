#!/usr/bin/env bash
# A new user's first half hour, replayed: a clean clone, the README's install in a fresh virtual environment,
# a kernel in a folder outside the checkout validated, a planted bug caught, its printed replay run as printed,
# the HTML report opened in headless Chromium.  Usage: bash docs/transcripts/user-kernel.sh WORKDIR
# (WORKDIR/clone, WORKDIR/venv, WORKDIR/mine/my_softmax.py; the screenshot lands in WORKDIR/index.png).
set -uo pipefail
checkout=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mkdir -p "$1" && cd "$1" && pwd)
rm -rf "$work/clone" "$work/venv" "$work/mine"
step() { echo; echo "\$ $*"; }
step git clone "$checkout" clone;  git clone -q "$checkout" "$work/clone"
cd "$work/clone"
python -m venv "$work/venv" && source "$work/venv/bin/activate"
step python -m pip install '".[cpu]"'
start=$SECONDS; python -m pip install -q ".[cpu]" 2>&1 | tail -3; echo "(install: $((SECONDS - start)) s)"
mkdir -p "$work/mine" && cp examples/my_kernels.py "$work/mine/my_softmax.py"
step python -m pytest -n auto --kernel "$work/mine/my_softmax.py:softmax"
start=$SECONDS; python -m pytest -n auto --kernel "$work/mine/my_softmax.py:softmax" 2>&1 | tail -2
echo "(exit ${PIPESTATUS[0]}, $((SECONDS - start)) s wall, $(nproc) cores)"
step python -m pytest -n auto --kernel "$work/mine/my_softmax.py:softmax_half_sum" --accuracy-report reports/mine
start=$SECONDS; python -m pytest -n auto --kernel "$work/mine/my_softmax.py:softmax_half_sum" --accuracy-report reports/mine > "$work/failing.log" 2>&1
echo "(exit $?, $((SECONDS - start)) s wall)"; grep -E "^(BeyondBound|worst element|FAILED)" "$work/failing.log" | head -4; tail -1 "$work/failing.log"
replay=$(grep -m1 -o "replay in one step: python -m harness.replay .*" "$work/failing.log" | sed 's/^replay in one step: //')
step "$replay"
bash -c "$replay" 2>&1 | tail -4; echo "(exit ${PIPESTATUS[0]})"
step chromium --headless --screenshot reports/mine/index.html
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,2400 \
    --screenshot="$work/index.png" "file://$work/clone/reports/mine/index.html" > /dev/null 2>&1
ls -l "$work/index.png"
