#!/usr/bin/env bash
# make fio: the image's fio on a test host and in the VM. fio's source as Debian ships it (the upstream tarball of
# unstable's fio, the version Buildroot builds), with the image's patches (board/ssdbench/patches/fio/), built
# into $1.
# Debian's archive is the only network: apt checks the tarball against the archive's signed index. Nothing
# outside $1 changes, and no root is needed: apt works on lists of its own in $1/apt.
set -euo pipefail
out=$(realpath -m "$1")
version=${FIO_VERSION:-3.41}
patches=$(realpath "$(dirname "$0")/../ssdbench/patches/fio")
apt=$out/apt
rm -rf "${out:?}/src" "${out:?}/bin"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts" "$out/src" "$out/bin"
cat >"$apt/parts/unstable.sources" <<SOURCES
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: unstable
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
cat >"$apt/apt.conf" <<CONF
Dir::Etc::SourceList "/dev/null";
Dir::Etc::SourceParts "$apt/parts";
Dir::State::Lists "$apt/lists";
Dir::State::status "/dev/null";
Dir::Cache "$apt/cache";
APT::Sandbox::User "root";
CONF
export APT_CONFIG=$apt/apt.conf
apt-get -qq update
# 'URI' file size SHA256:hash, for each file of the source package; only the upstream tarball is built from.
line=$(apt-get -qq source --print-uris fio | grep "fio_$version\.orig\.tar\.[a-z0-9]* " || true)
if [ -z "$line" ]; then
    echo "build-fio: Debian unstable no longer has fio $version: $(apt-cache showsrc fio | grep -m1 '^Version:')" >&2
    exit 1
fi
read -r uri file _ sum <<<"$line"
uri=${uri//\'/}
curl -fsS -o "$out/src/$file" "$uri"
echo "${sum#SHA256:}  $out/src/$file" | sha256sum -c --quiet
tar -xf "$out/src/$file" -C "$out/src"
cd "$out/src/fio-$version"
for p in "$patches"/*.patch; do
    patch -p1 -F0 -s <"$p"
done
# Static (libaio and zlib inside): the same program runs the host's tests and, in the VM image (make vm-image's
# VM_FIO), on trixie's C library, whose libaio is another soname (libaio.so.1t64). The linker warns that dlopen
# and getaddrinfo want the host's glibc at run time: only external engines and fio's network engines use them.
./configure --disable-native --build-static >configure.log
make -s -j"$(nproc)" fio >make.log 2>&1
install -s fio "$out/bin/fio"
"$out/bin/fio" --version
