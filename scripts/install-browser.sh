#!/usr/bin/env bash
# Installs the browser the web console's end-to-end test drives: Debian's
# `chromium`, run headless. The test talks to it over the DevTools protocol
# through a pipe (chromedp, a Go module), so no separate driver is needed.
# Safe to rerun: it does nothing when chromium is already there.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
	echo "chromium present: $(chromium --version 2>/dev/null || echo unknown version)"
	exit 0
fi
if [[ $(id -u) != 0 ]]; then
	echo "error: installing chromium needs root (apt-get install chromium); run this script as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium installed: $(chromium --version 2>/dev/null || echo unknown version)"
