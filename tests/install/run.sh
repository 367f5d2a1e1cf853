#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds an outside program
# against it twice: with CMake's find_package(trapkit) and with pkg-config.
set -euo pipefail
build=$1 here=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

echo "== find_package(trapkit)"
cmake -S "$here" -B "$tmp/cm" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm" >/dev/null
"$tmp/cm/consumer"
"$tmp/cm/consumer_static"

echo "== pkg-config"
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -n1)
export PKG_CONFIG_PATH=$libdir
cc -std=c11 "$here/consumer.c" -o "$tmp/pc_consumer" $(pkg-config --cflags --libs trapkit) \
    -Wl,-rpath,"$(dirname "$libdir")"
"$tmp/pc_consumer"
cc -std=c11 "$here/consumer.c" -o "$tmp/pc_consumer_static" $(pkg-config --cflags trapkit) \
    "$(dirname "$libdir")/libtrapkit.a" -pthread
"$tmp/pc_consumer_static"
echo "install consumer: ok"
