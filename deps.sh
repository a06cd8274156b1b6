#!/bin/sh
# Installs what the build, the tests and `make fuzz` need on Debian 12 (or Ubuntu): as root directly,
# otherwise through sudo.  README's quick start and CI (.ci/run) both run it, so the list is kept once.
set -eu
if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
# a fresh container has no package lists yet
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    build-essential libgsl-dev libcsv-dev libcjson-dev libcmocka-dev gnuplot-nox \
    clang libclang-rt-14-dev
