#!/usr/bin/env bash
# Builds kube-controller-manager from the pinned Kubernetes module (go.mod/go.sum beside this
# script) for the tests that need real controllers: Deployments and ReplicaSets making pods, the
# garbage collector, the node lifecycle controller marking a silent node NotReady, tainting it
# and evicting its pods. Cached apart from the rest of the control plane (keyed by the module
# and this script), so adding it rebuilds nothing else; linked into tests/kube/bin.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

version=v1.36.3
cache_root="${PLACEMENT_KUBE_CACHE:-$HOME/.cache/placement-webhook/kube}"
key="$(cat go.mod go.sum controller-manager.sh | sha256sum | cut -c1-16)"
out="$cache_root/controller-manager-$key"

if [ -x "$out/kube-controller-manager" ]; then
  echo "kube-controller-manager $version: cached in $out"
else
  started=$SECONDS
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
  ldflags="-s -w"
  # As build.sh: without these the binary reports v0.0.0.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  tmp="$out.partial"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  go build -trimpath -ldflags "$ldflags" -o "$tmp/" k8s.io/kubernetes/cmd/kube-controller-manager
  rm -rf "$out"
  mv "$tmp" "$out"
  echo "kube-controller-manager $version: built in $((SECONDS - started)) s into $out"
fi
# bin is build.sh's link to its cache entry: the binary is linked in beside the others.
ln -sfn "$out/kube-controller-manager" "$here/bin/kube-controller-manager"
"$here/bin/kube-controller-manager" --version
