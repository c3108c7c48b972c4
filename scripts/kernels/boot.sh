# shellcheck shell=bash
# Sourced by scripts/kernels.sh: booting a kernel laid out by kernel_fetch (fetch.sh) under qemu
# with this machine's root file system shared read-only (virtme-ng), running one command inside.
# Takes an architecture so that arm64 (issue 31) can add its own way of booting beside amd64's.

# virtme-ng, pinned: its --exec plumbing (virtio-serial ports made by udev in the guest) is what
# this script relies on.
VNG_VERSION=1.42

# kernels_vng: install virtme-ng into a venv under target/kernels once; print the venv's bin.
kernels_vng() {
  local venv="$KERNELS_DIR/venv"
  if ! "$venv/bin/vng" --version 2>/dev/null | grep -qx "virtme-ng $VNG_VERSION"; then
    echo "kernels: installing virtme-ng $VNG_VERSION into $venv" >&2
    python3 -m venv "$venv" >&2 && "$venv/bin/pip" install -q "virtme-ng==$VNG_VERSION" >&2 || {
      echo "kernels: cannot install virtme-ng $VNG_VERSION from PyPI into $venv" >&2
      return 1
    }
  fi
  echo "$venv/bin"
}

# kernels_accel ARCH DIR: "kvm" when a short boot of the kernel in DIR with KVM reaches user
# space, else "tcg". Here /dev/kvm exists but is a paravirtual hypervisor on which stock kernels
# hang, so only a real boot tells. The answer is kept per host boot (boot_id), and
# KERNELS_ACCEL=kvm|tcg skips the probe.
kernels_accel() {
  local arch=$1 dir=$2
  if [ -n "${KERNELS_ACCEL:-}" ]; then
    echo "$KERNELS_ACCEL"
    return 0
  fi
  if [ "$arch" != "$(dpkg --print-architecture)" ] || [ ! -w /dev/kvm ]; then
    echo tcg
    return 0
  fi
  local memo
  memo="$KERNELS_DIR/accel-$arch-$(cat /proc/sys/kernel/random/boot_id)"
  if [ ! -f "$memo" ]; then
    local said
    # A KVM boot reaches user space in a few seconds where KVM works; 30 s is ample.
    said=$(KERNELS_ACCEL=kvm KERNELS_BOOT_TIMEOUT=30 kernel_boot "$arch" "$dir" "echo kvm-boots" 2>/dev/null || true)
    if [[ "$said" == *kvm-boots* ]]; then echo kvm >"$memo"; else echo tcg >"$memo"; fi
    echo "kernels: KVM probe on $(cat "$dir/release"): $(cat "$memo")" >&2
  fi
  cat "$memo"
}

# kernel_boot ARCH DIR CMD [VNG-OPTION...]: boot the kernel in DIR (vmlinuz-<release> and
# lib/modules/<release>/) with one vCPU and 2 GiB, run CMD as root in it with the host's root
# file system read-only, and return CMD's exit status (124 when the boot outlives
# KERNELS_BOOT_TIMEOUT seconds, default 1500: a guest beside another took 650 s here). Extra
# options (--rwdir DIR, --overlay-rwdir DIR) go to vng. Under KERNELS_LOCK=FILE the boot holds
# that lock (the project's shared one).
kernel_boot() {
  local arch=$1 dir=$2 cmd=$3
  shift 3
  case "$arch" in
    amd64) ;;
    *)
      echo "kernels: the matrix boots amd64 only; arm64 has its own job (scripts/arm64.sh, docs/kernels.md)" >&2
      return 2
      ;;
  esac
  local bin release accel
  bin=$(kernels_vng) || return 1
  release=$(cat "$dir/release")
  accel=$(kernels_accel "$arch" "$dir")
  local -a kvm=()
  [ "$accel" = kvm ] || kvm=(--disable-kvm)
  # The lock is taken here rather than by flock(1) around vng, so that the wait is known:
  # KERNELS_LOCK_WAIT holds it (seconds) after the call.
  local t0=$SECONDS fd=""
  if [ -n "${KERNELS_LOCK:-}" ]; then
    exec {fd}>>"$KERNELS_LOCK"
    flock "$fd"
  fi
  KERNELS_LOCK_WAIT=$((SECONDS - t0))
  # One vCPU: with two, TCG let a CPU run kernel text another was patching (a tracepoint's
  # static key going live as memtrack attaches): 6.12 died once with "Oops: int3" in
  # trace_rss_stat. The guests' tests need no parallelism.
  # --force-9p: virtiofsd is not installed, and waiting for it costs seconds per boot. vng's
  # output is piped: its virtio-serial ports reopen /proc/self/fd/1, and pieces written to a
  # file overwrite each other.
  local rc
  PATH="$bin:$PATH" timeout -k 10 "${KERNELS_BOOT_TIMEOUT:-1500}" \
    vng --force-9p --run "$dir/vmlinuz-$release" "${kvm[@]}" --memory 2G --cpus 1 "$@" \
    --exec "$cmd" 2>&1 | cat
  rc=${PIPESTATUS[0]}
  if [ -n "$fd" ]; then
    flock -u "$fd"
    exec {fd}>&-
  fi
  return "$rc"
}
