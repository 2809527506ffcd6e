#!/usr/bin/env bash
# Installs a released mptester for the GitHub Actions runner's OS and
# architecture (action.yml at the repository root runs it): downloads the
# archive goreleaser.yaml names and the release's checksums file, checks
# the archive's SHA-256 before unpacking anything, and puts the binary on
# the job's PATH. A missing or wrong checksum fails the step.
#
# Environment: MPTESTER_VERSION (1.2.3, v1.2.3 or latest), RUNNER_OS
# (Linux, macOS, Windows), RUNNER_ARCH (X64, ARM64, ARM), RUNNER_TEMP,
# GITHUB_PATH; MPTESTER_RELEASE_URL overrides where releases are
# downloaded from (a mirror; file:// in the test's dry run).
set -euo pipefail

repo=https://github.com/mptester/mptester
base=${MPTESTER_RELEASE_URL:-$repo/releases/download}
version=${MPTESTER_VERSION:-latest}

die() { echo "::error title=mptester install::$*" >&2; exit 1; }

if [ "$version" = latest ]; then
  # /releases/latest redirects to /releases/tag/vX.Y.Z.
  tag_url=$(curl -fsSL -o /dev/null -w '%{url_effective}' "$repo/releases/latest") || die "cannot find the latest release"
  version=${tag_url##*/}
fi
version=${version#v}
case "$version" in
  ''|*[!0-9A-Za-z.+-]*) die "version '$version' is not a release version" ;;
esac

case "${RUNNER_OS:-}" in
  Linux) os=linux ;;
  macOS) os=darwin ;;
  Windows) os=windows ;;
  *) die "runner OS '${RUNNER_OS:-}' has no mptester release" ;;
esac
case "${RUNNER_ARCH:-}" in
  X64) arch=amd64 ;;
  ARM64) arch=arm64 ;;
  ARM) arch=armv7 ;;
  *) die "runner architecture '${RUNNER_ARCH:-}' has no mptester release" ;;
esac
ext=tar.gz
[ "$os" = windows ] && ext=zip
# goreleaser.yaml: archives.name_template and checksum.name_template.
archive="mptester_${version}_${os}_${arch}.${ext}"
sums="mptester_${version}_checksums.txt"

work=$(mktemp -d "${RUNNER_TEMP:-/tmp}/mptester-install.XXXXXX")
curl -fsSL --retry 3 -o "$work/$sums" "$base/v$version/$sums" || die "cannot download $sums of v$version"
curl -fsSL --retry 3 -o "$work/$archive" "$base/v$version/$archive" || die "cannot download $archive"

want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1 }' "$work/$sums")
[ -n "$want" ] || die "$sums has no line for $archive"
if command -v sha256sum >/dev/null 2>&1; then
  got=$(sha256sum "$work/$archive" | awk '{print $1}')
else
  got=$(shasum -a 256 "$work/$archive" | awk '{print $1}')
fi
[ "$got" = "$want" ] || die "checksum mismatch for $archive: sha256 $got, $sums says $want"

dest="${RUNNER_TEMP:-/tmp}/mptester-$version"
mkdir -p "$dest"
if [ "$ext" = zip ]; then
  if command -v unzip >/dev/null 2>&1; then
    unzip -qo "$work/$archive" -d "$dest"
  else
    powershell -NoProfile -Command "Expand-Archive -Force -Path '$work/$archive' -DestinationPath '$dest'"
  fi
else
  tar -xzf "$work/$archive" -C "$dest"
fi
rm -rf "$work"
[ -e "$dest/mptester" ] || [ -e "$dest/mptester.exe" ] || die "$archive has no mptester binary"
echo "$dest" >> "${GITHUB_PATH:-/dev/null}"
echo "mptester $version ($os/$arch, sha256 $got) in $dest"
