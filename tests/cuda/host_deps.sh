# tests/cuda/host_deps.sh — sourced by the GPU scripts: the host libraries the full project
# needs (PCRE2, utf8proc, jansson, libmicrohttpd, xxhash, cmocka) are missing on the GPU image;
# when .debs/ holds their Debian packages (carried; see tests/cuda/LAST_RUN.md) they are
# unpacked into /tmp/deps, never into /, and the build and the loader are pointed there.
# Sets PKGCONF_ARG for cmake when the image has no pkg-config.
PKGCONF_ARG=""
if [ -d .debs ] && ! pkg-config --exists libpcre2-8 2>/dev/null; then
    DEPS=/tmp/deps
    mkdir -p "$DEPS"
    for f in .debs/*.deb; do dpkg -x "$f" "$DEPS"; done
    # libmicrohttpd.pc names gnutls as a private requirement, whose .pc is not there: drop it
    # (only the .so's own DT_NEEDED matters, and the GPU image has libgnutls)
    sed -i '/^Requires.private/d' "$DEPS"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
    ML=$DEPS/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_PATH=$ML/pkgconfig:$DEPS/usr/share/pkgconfig
    export PKG_CONFIG_SYSROOT_DIR=$DEPS PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
    export CPATH=$DEPS/usr/include${CPATH:+:$CPATH} LIBRARY_PATH=$ML${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$ML${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    command -v pkg-config > /dev/null || PKGCONF_ARG="-DPKG_CONFIG_EXECUTABLE=$DEPS/usr/bin/pkgconf"
    echo "host libraries unpacked from .debs into $DEPS" >&2
fi
