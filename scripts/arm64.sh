#!/usr/bin/env bash
# The arm64 job (issue 31): cross-builds the static arm64 memtrack and the C/C++ fixtures on
# this x86 machine, boots Debian's arm64 kernel (bookworm, 6.1) under qemu-system-aarch64
# (-M virt -cpu max, TCG) with an initramfs it assembles from Debian's arm64 packages
# (busybox-static, libc6, libstdc++6, libgcc-s1: scripts/arm64-fetch.sh, cached under
# target/arm64), once with each userland of ARM64_ROOTS (default "bookworm trixie": glibc 2.36
# built without, and 2.41 with PAC/BTI, whose free moves its probe past `bti c`), and checks
# inside, as the guest's root:
#
#   - `memtrack doctor` says the kernel can record,
#   - testdata/example.c (dynamic against Debian's arm64 glibc, and static) with its exact counts,
#   - testdata/fork_tree.c exec'ing testdata/malloc_free.c: every process's exact heap,
#   - testdata/alloc/cxx_new_delete.cpp: libstdc++'s operator new/delete, the 13 fingerprints,
#   - testdata/example.c with --stacks: the same counts, every walk complete,
#   - testdata/stacks/chain.c with --stacks: its 7777-byte allocation's frames, innermost first,
#     are the frames gdb's bt shows at malloc's first instruction when the same binary runs on
#     this machine under qemu-aarch64-static with the same userland (gdb-multiarch; the oracle
#     runs with pointer authentication off, since qemu 7.2's gdb stub does not tell gdb the PAC
#     mask and gdb's own unwinding then stops at the first signed return address),
#   - testdata/stacks/signal.c likewise, through the vDSO's signal trampoline: the handler's
#     frames as gdb shows them at malloc, then the interrupted code's as gdb shows them where
#     SIGUSR1 arrives (gdb does not unwind through qemu-user's own trampoline).
#
# The guest prints each step's output between markers on its serial console; this script
# checks them with python3 on the host. Any mismatch fails the job (exit 1).
# MEMTRACK_ARM64=0 skips it (exit 0, saying so). Under KERNELS_LOCK=FILE the boot holds that lock.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${MEMTRACK_ARM64:-1}" = 0 ]; then
  echo "arm64: skipped (MEMTRACK_ARM64=0)" >&2
  exit 0
fi
for tool in qemu-system-aarch64 qemu-aarch64-static gdb-multiarch aarch64-linux-gnu-gcc \
  aarch64-linux-gnu-g++ cpio python3; do
  command -v "$tool" >/dev/null || {
    echo "arm64: $tool is missing; run scripts/setup.sh" >&2
    exit 1
  }
done
# shellcheck source=scripts/arm64-fetch.sh
. scripts/arm64-fetch.sh

memtrack=${ARM64_MEMTRACK:-}
if [ -z "$memtrack" ]; then
  scripts/build-static.sh --target aarch64 >&2
  memtrack=target/static/memtrack-aarch64
  # The arm64-only code (cfg(target_arch), c_char's sign) is linted where it compiles: the
  # x86_64 clippy of scripts/test.sh never sees it.
  echo "arm64: cargo clippy --target aarch64-unknown-linux-gnu" >&2
  CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    cargo clippy --release --locked --features static --target aarch64-unknown-linux-gnu \
    --target-dir target/static -- -D warnings
fi
kernel=$(arm64_kernel)
release=$(cat "$kernel/release")

# boot_with SUITE: the initramfs with SUITE's arm64 userland, booted; its checks' verdict.
boot_with() {
  local suite=$1 libs
  libs=$(ARM64_SUITE=$suite arm64_debs "root-$suite" busybox-static libc6 libstdc++6 libgcc-s1)
  local work="$ARM64_DIR/run-$suite"
  rm -rf "$work" && mkdir -p "$work/root/bin" "$work/root/t"
  local root=$work/root
  cp -a "$libs/root/." "$root/"
  # Merged /usr (trixie): the packages ship only usr/, base-files' symlinks are not there.
  [ -e "$root/lib" ] || ln -s usr/lib "$root/lib"
  [ -e "$root/bin/busybox" ] || cp "$root/usr/bin/busybox" "$root/bin/busybox"
  cp "$memtrack" "$root/bin/memtrack"
  # The fixtures with the tests' own flags (tests/common/mod.rs, fixture()), linked against the
  # cross compiler's glibc (bookworm's 2.36), which runs on every newer one.
  local cflags=(-O2 -g -Wall -Werror -pthread -I testdata)
  aarch64-linux-gnu-gcc "${cflags[@]}" -o "$root/t/example" testdata/example.c
  aarch64-linux-gnu-gcc "${cflags[@]}" -static -o "$root/t/example-static" testdata/example.c
  aarch64-linux-gnu-gcc "${cflags[@]}" -o "$root/t/fork_tree" testdata/fork_tree.c
  aarch64-linux-gnu-gcc "${cflags[@]}" -o "$root/t/malloc_free" testdata/malloc_free.c
  aarch64-linux-gnu-g++ -O2 -g -Wall -Werror -std=c++17 -o "$root/t/cxx_new_delete" \
    testdata/alloc/cxx_new_delete.cpp
  # The stacks fixture as tests/stacks.rs builds it (-fomit-frame-pointer), its library in /t.
  aarch64-linux-gnu-gcc "${cflags[@]}" -fomit-frame-pointer -shared -fPIC \
    -o "$root/t/libstacks_chain.so" testdata/stacks/chainlib.c
  aarch64-linux-gnu-gcc "${cflags[@]}" -fomit-frame-pointer -o "$root/t/chain" \
    testdata/stacks/chain.c -L"$root/t" -lstacks_chain -Wl,-rpath,/t
  aarch64-linux-gnu-gcc "${cflags[@]}" -fomit-frame-pointer -o "$root/t/signal" \
    testdata/stacks/signal.c
  { gdb_backtrace "$root" chain 7777 && gdb_backtrace "$root" signal 7853 2; } >"$work/gdb.txt"
  cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /tmp /dev /usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf
ln -sf /bin/true /usr/bin/true
cd /tmp
# step NAME CMD...: CMD's output between markers, then its exit status.
step() {
  name=$1
  shift
  echo "@@@ begin $name"
  "$@" 2>&1
  echo "@@@ end $name rc=$?"
}
step uname uname -r
step doctor memtrack doctor
# The example's stdout is a pipe, as on the host (scripts/kernels/guest.sh says why).
for ex in example example-static; do
  step "record-$ex" sh -c "memtrack record -q -o /tmp/$ex.mt -- /t/$ex | cat"
  step "json-$ex" memtrack report --format json "/tmp/$ex.mt"
done
# With --stacks: the counts must not change, and every walk is complete.
step record-stacks sh -c "memtrack record -q --stacks -o /tmp/stacks.mt -- /t/example | cat"
step json-stacks memtrack report --stacks --format json /tmp/stacks.mt
step report-stacks memtrack report --stacks /tmp/stacks.mt
# With a sample of the stacks (the walker tail-called, or walked inline where the kernel
# refuses the tail call): the same exact counts.
step record-sampled sh -c "memtrack record -q --stack-sample 16KiB -o /tmp/sampled.mt -- /t/example | cat"
step json-sampled memtrack report --stacks --format json /tmp/sampled.mt
step record-chain memtrack record -q --stacks -o /tmp/chain.mt -- /t/chain
step json-chain memtrack report --stacks --format json /tmp/chain.mt
step record-signal memtrack record -q --stacks -o /tmp/signal.mt -- /t/signal
step json-signal memtrack report --stacks --format json /tmp/signal.mt
step record-fork_tree memtrack record -q -o /tmp/fork_tree.mt -- /t/fork_tree /t/malloc_free
step json-fork_tree memtrack report --format json /tmp/fork_tree.mt
step record-cxx memtrack record -q -o /tmp/cxx.mt -- /t/cxx_new_delete
step json-cxx memtrack report --format json /tmp/cxx.mt
echo "@@@ done"
poweroff -f
INIT
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.gz"

  local console="$work/console.txt" fd="" t0=$SECONDS rc=0
  if [ -n "${KERNELS_LOCK:-}" ]; then
    exec {fd}>>"$KERNELS_LOCK"
    flock "$fd"
  fi
  # pauth-impdef: QEMU's own pointer-authentication algorithm instead of the architected QARMA,
  # which TCG emulates slowly; the guest still signs and checks every return address.
  timeout -k 10 "${ARM64_BOOT_TIMEOUT:-600}" qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -smp 1 -m 2G \
    -nographic -no-reboot -kernel "$kernel/vmlinuz-$release" -initrd "$work/initramfs.gz" \
    -append "console=ttyAMA0 rdinit=/init quiet loglevel=3 panic=-1" >"$console" 2>&1 || rc=$?
  if [ -n "$fd" ]; then
    flock -u "$fd"
    exec {fd}>&-
  fi
  echo "arm64: $suite userland on $release ran $((SECONDS - t0)) s (qemu exit $rc); console in $console" >&2
  python3 scripts/arm64-check.py "$console" "$work/gdb.txt"
}

# gdb_backtrace ROOT NAME SIZE [STOPS]: gdb's bt at each of STOPS (1) stops of ROOT/t/NAME
# after main, the last the SIZE-byte malloc, run under qemu-aarch64-static with ROOT as its
# root (the libraries the guest has, /lib included); each between markers named NAME. A signal
# stops it (gdb's default for SIGUSR1), and is passed on when it continues.
gdb_backtrace() {
  local root=$1 name=$2 size=$3 stops=${4:-1} port=$((20000 + RANDOM % 20000)) pid i
  local -a at=()
  for ((i = 0; i < stops; i++)); do
    at+=(-ex continue -ex "echo ==memtrack-stop $name==\\n" -ex bt)
  done
  qemu-aarch64-static -cpu max,pauth=off -L "$root" -g "$port" "$root/t/$name" >/dev/null &
  pid=$!
  # gdb retries the connection until qemu listens (tcp auto-retry, on by default).
  timeout 120 gdb-multiarch -batch -nx \
    -ex 'set pagination off' -ex 'set width 0' -ex 'set confirm off' \
    -ex 'set print frame-arguments none' -ex 'set backtrace past-main on' \
    -ex "set sysroot $root" -ex "file $root/t/$name" -ex "target remote 127.0.0.1:$port" \
    -ex 'break main' -ex continue -ex "break *malloc if \$x0 == $size" "${at[@]}" \
    -ex "echo ==memtrack-end $name==\\n" -ex kill 2>&1 || true
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

failed=0
for suite in ${ARM64_ROOTS:-bookworm trixie}; do
  boot_with "$suite" || failed=1
done
exit "$failed"
