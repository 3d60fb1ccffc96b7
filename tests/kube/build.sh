#!/usr/bin/env bash
# Builds the control plane the tests run against (etcd, kube-apiserver, kube-scheduler, kubectl
# and a test-only second mutating webhook) from this Go module, pinned by go.mod/go.sum, Helm
# (the chart's tests) from the module in helm/ and kwok (nodes and pods that start, without a
# kubelet) from the module in kwok/, and links tests/kube/bin to the result. Helm and kwok have
# modules of their own: their releases require other Kubernetes libraries than the pinned
# components.
# The binaries are cached under $PLACEMENT_KUBE_CACHE (default ~/.cache/placement-webhook/kube),
# keyed by both modules' files, so a warm machine skips the build.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

version=v1.36.3
cache_root="${PLACEMENT_KUBE_CACHE:-$HOME/.cache/placement-webhook/kube}"
key="$(cat go.mod go.sum build.sh etcd/*.go mutator/*.go helm/go.mod helm/go.sum kwok/go.mod kwok/go.sum \
  | sha256sum | cut -c1-16)"
out="$cache_root/$key"

if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-scheduler" ] && [ -x "$out/etcd" ] \
  && [ -x "$out/kubectl" ] && [ -x "$out/mutator" ] && [ -x "$out/helm" ] && [ -x "$out/kwok" ]; then
  echo "control plane $version: cached in $out"
else
  started=$SECONDS
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
  major=1
  minor=36
  ldflags="-s -w"
  # Without these the binaries report v0.0.0 and discovery a version no client expects.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  tmp="$out.partial"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" ./etcd
  go build -trimpath -ldflags "-s -w" -o "$tmp/mutator" ./mutator
  helm_started=$SECONDS
  (
    cd helm
    # As Helm's Makefile sets them: its version, and the Kubernetes version it assumes without a
    # cluster (`helm template`, `helm lint`): 1.<minor> for its client-go v0.<minor>.
    helm_version="$(go list -m -f '{{.Version}}' helm.sh/helm/v3)"
    client_minor="$(go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)"
    helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
    helm_ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
      helm_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$client_minor"
    done
    go build -trimpath -ldflags "$helm_ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm
  )
  echo "helm: built in $((SECONDS - helm_started)) s"
  kwok_started=$SECONDS
  (cd kwok && go build -trimpath -ldflags "-s -w" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
  echo "kwok: built in $((SECONDS - kwok_started)) s"
  rm -rf "$out"
  mv "$tmp" "$out"
  echo "control plane $version: built in $((SECONDS - started)) s into $out"
fi
ln -sfn "$out" "$here/bin"
"$here/bin/kube-apiserver" --version
"$here/bin/helm" version --short
"$here/bin/kwok" --version
