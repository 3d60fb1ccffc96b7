#!/usr/bin/env bash
# Builds or fetches everything the tests run besides the webhook, each part cached by its own
# pinned files: the control plane, Helm and kwok (tests/kube/build.sh), kube-controller-manager
# (tests/kube/controller-manager.sh), Prometheus and promtool
# (tests/prometheus/build.sh), and Flink's classpath with the test job (tests/flink, Maven).
# The README's test command runs this first. Needs Go, a JDK and Maven; no root.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/kube/build.sh"
bash "$here/kube/controller-manager.sh"
bash "$here/prometheus/build.sh"
(cd "$here/flink" && mvn -B -q dependency:resolve compile)
echo "tests/flink: Maven classpath resolved and the job compiled"
