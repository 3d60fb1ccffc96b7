#!/usr/bin/env bash
# Builds Prometheus and promtool, release 3.16.0 (module github.com/prometheus/prometheus
# v0.316.0, pinned by go.mod/go.sum here), from the Go module proxy, and links
# tests/prometheus/bin to the result. The tests start this Prometheus (scraping the synthetic
# exporter and kwok's node series) and run this promtool on the alerting rules; no system
# package or root is needed. A module of its own: the release requires other Kubernetes
# libraries than the control plane's in tests/kube.
# Cached under $PLACEMENT_KUBE_CACHE (default ~/.cache/placement-webhook/kube), keyed by this
# folder's files, so a warm machine skips the build.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

release=3.16.0
cache_root="${PLACEMENT_KUBE_CACHE:-$HOME/.cache/placement-webhook/kube}"
key="$(cat go.mod go.sum build.sh | sha256sum | cut -c1-16)"
out="$cache_root/prometheus-$key"

if [ -x "$out/prometheus" ] && [ -x "$out/promtool" ]; then
  echo "prometheus $release: cached in $out"
else
  started=$SECONDS
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
  module_version="$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)"
  # As Prometheus's own release build stamps them: without them `--version` is blank.
  ldflags="-s -w"
  for field in "Version=$release" "Revision=$module_version" "Branch=release" \
    "BuildUser=tests/prometheus/build.sh" "BuildDate=1970-01-01T00:00:00Z"; do
    ldflags+=" -X github.com/prometheus/common/version.$field"
  done
  tmp="$out.partial"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
    github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
  rm -rf "$out"
  mv "$tmp" "$out"
  echo "prometheus $release: built in $((SECONDS - started)) s into $out"
fi
ln -sfn "$out" "$here/bin"
# `sed -n 1p`, not `head -n 1`: head may exit before the tool has written everything.
"$here/bin/prometheus" --version 2>&1 | sed -n 1p
"$here/bin/promtool" --version 2>&1 | sed -n 1p
