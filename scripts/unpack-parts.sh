#!/usr/bin/env bash
# Packages too large for one call to a GPU machine (its transfer is size-capped) travel as
# parts of one .tar.xz, made here with
#   split -n N --numeric-suffixes=1 NAME.tar.xz NAME.tar.xz.part-   (then part-01 -> part-1ofN ...)
# and carried over successive calls to the same machine.
#   bash scripts/unpack-parts.sh FROM KEEP SITE
# copies every FROM/**/NAME.tar.xz.part-KofN into KEEP, where the parts wait for each other;
# once all N of a NAME are there it unpacks NAME into SITE, once (KEEP/NAME.tar.xz.done).
# Prints "unpacked NAME" or "NAME: k of N parts here". Used by scripts/gpu-jit.sh and
# fixtures/collect_iket.sh.
set -uo pipefail
from=$1 keep=$2 site=$3
mkdir -p "$keep" "$site"
[ -d "$from" ] && find "$from" -name '*.part-*of*' -exec cp {} "$keep/" \;
for first in "$keep"/*.part-1of*; do
  [ -f "$first" ] || continue
  stem=${first%.part-1of*}; n=${first##*of}
  [ -f "$stem.done" ] && continue
  parts=(); for k in $(seq 1 "$n"); do parts+=("$stem.part-${k}of$n"); done
  if ls "${parts[@]}" >/dev/null 2>&1; then
    cat "${parts[@]}" | tar xJf - -C "$site" && touch "$stem.done" && echo "unpacked $(basename "$stem")"
  else
    echo "$(basename "$stem"): $(ls "$stem".part-* | wc -l) of $n parts here"
  fi
done
exit 0
