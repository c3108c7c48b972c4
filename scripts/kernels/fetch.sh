# shellcheck shell=bash
# Sourced by scripts/kernels.sh: fetching Debian's kernel packages for one suite and one
# architecture through a private apt configuration, laid out for booting. Kept apart from the
# booting (boot.sh) so that arm64 (issue 31) reuses it with ARCH=arm64.

# The mirror of Debian's archive NAME (debian or debian-security) that this machine's own apt
# sources name; nothing host-specific is written in this repository. When the machine names no
# security mirror, the main mirror's sibling path is tried (Debian's main mirror serves both).
kernels_mirror() {
  local want=$1 found
  found=$(
    {
      grep -hsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
        sed -E 's/\[[^]]*\]//' | awk '{print $2}'
      grep -hsiE '^URIs:' /etc/apt/sources.list.d/*.sources | sed -E 's/^URIs:[[:space:]]*//I' | tr ' ' '\n'
    } | grep -E "/${want}/?\$" | head -n 1
  ) || true
  if [ -z "$found" ] && [ "$want" = debian-security ]; then
    found=$(kernels_mirror debian)
    [ -n "$found" ] && found="${found%/}" && found="${found%/debian}/debian-security"
  fi
  [ -n "$found" ] || {
    echo "kernels: this machine's apt sources name no Debian mirror (/$want); add one to /etc/apt/sources.list.d" >&2
    return 1
  }
  echo "${found%/}"
}

# The apt options that keep everything under DIR: the machine's sources, lists, cache and lock
# are never read or written.
kernels_apt_opts() {
  local dir=$1 arch=$2
  printf '%s\n' -o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=- \
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o Debug::NoLocking=1 \
    -o "APT::Architecture=$arch" -o "APT::Architectures=$arch" -o Dir::State::status=/dev/null
}

# kernel_fetch ARCH SUITE: download linux-image-ARCH of SUITE and the kernel packages it depends
# on (in sid, 7.x is split into linux-binary-*, linux-modules-*, linux-base-*), unpack them, and
# print the directory that holds vmlinuz-<release> and lib/modules/<release>/ (depmod run), the
# layout virtme-ng boots. Cached under target/kernels/ARCH/SUITE: once unpacked, a second call
# downloads nothing (KERNELS_REFRESH=1 fetches the suite's newest again).
kernel_fetch() {
  local arch=$1 suite=$2
  local dir="$KERNELS_DIR/$arch/$suite"
  if [ -f "$dir/release" ] && [ -z "${KERNELS_REFRESH:-}" ]; then
    echo "$dir"
    return 0
  fi
  local archive=debian
  case "$suite" in *-security) archive=debian-security ;; esac
  local mirror
  mirror=$(kernels_mirror "$archive") || return 1
  local apt="$dir/apt"
  rm -rf "$dir.new" && mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dir.new"
  echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
    >"$apt/sources.list"
  local opts
  mapfile -t opts < <(kernels_apt_opts "$apt" "$arch")
  echo "kernels: $suite ($arch): apt-get update from $mirror" >&2
  apt-get -q "${opts[@]}" update >"$apt/update.log" 2>&1 || {
    echo "kernels: apt-get update of $suite failed (log: $apt/update.log)" >&2
    return 1
  }
  # Follow Depends from the meta package through every linux-* package of the kernel itself;
  # alternatives (initramfs tools) and anything else a real install would need are not wanted.
  local -a todo=("linux-image-$arch") pkgs=()
  local p deps
  while ((${#todo[@]})); do
    p=${todo[0]}
    todo=("${todo[@]:1}")
    [[ " ${pkgs[*]} " == *" $p "* ]] && continue
    pkgs+=("$p")
    deps=$(apt-cache "${opts[@]}" show "$p" 2>/dev/null | sed -n 's/^Depends: //p' | head -n 1)
    while IFS= read -r d; do
      d=$(echo "$d" | sed -E 's/^[[:space:]]+//; s/[[:space:](].*//')
      [[ "$d" =~ ^linux-(image|binary|modules|base)- ]] && todo+=("$d")
    done < <(echo "$deps" | tr ',' '\n' | grep -v '|')
  done
  echo "kernels: $suite ($arch): ${pkgs[*]}" >&2
  (cd "$dir.new" && apt-get -q "${opts[@]}" download "${pkgs[@]}" >"$apt/download.log" 2>&1) || {
    echo "kernels: apt-get download of ${pkgs[*]} ($suite) failed (log: $apt/download.log)" >&2
    return 1
  }
  local deb
  mkdir -p "$dir.new/root"
  for deb in "$dir.new"/*.deb; do
    dpkg-deb -x "$deb" "$dir.new/root"
  done
  # The kernel is boot/vmlinuz-<release>, or (sid's 7.x, merged /usr) usr/lib/modules/<release>/vmlinuz.
  local vmlinuz release
  vmlinuz=$(find "$dir.new/root/boot" "$dir.new/root/lib/modules" "$dir.new/root/usr/lib/modules" \
    -maxdepth 2 \( -name 'vmlinuz-*' -o -name vmlinuz \) 2>/dev/null | head -n 1 || true)
  [ -n "$vmlinuz" ] || {
    echo "kernels: no vmlinuz in ${pkgs[*]} ($suite)" >&2
    return 1
  }
  case "$vmlinuz" in
    */vmlinuz-*) release=${vmlinuz##*/vmlinuz-} ;;
    *) release=$(basename "$(dirname "$vmlinuz")") ;;
  esac
  mv "$vmlinuz" "$dir.new/vmlinuz-$release"
  # virtme-ng looks for the modules in lib/modules/<release>/ beside the vmlinuz; merged-/usr
  # packages put them under usr/lib.
  mkdir -p "$dir.new/lib/modules"
  if [ -d "$dir.new/root/lib/modules/$release" ]; then
    mv "$dir.new/root/lib/modules/$release" "$dir.new/lib/modules/"
  else
    mv "$dir.new/root/usr/lib/modules/$release" "$dir.new/lib/modules/"
  fi
  depmod -b "$dir.new" "$release"
  rm -rf "$dir.new/root" "$dir.new"/*.deb
  echo "$release" >"$dir.new/release"
  mv "$apt" "$dir.new/apt" && rm -rf "$dir" && mv "$dir.new" "$dir"
  echo "$dir"
}
