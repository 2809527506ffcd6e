#!/bin/sh
# Creates the services' users and the agent's spool (sysusers.d and
# tmpfiles.d as installed; useradd where systemd is absent). Enables nothing.
set -e
if command -v systemd-sysusers >/dev/null 2>&1; then
  systemd-sysusers /usr/lib/sysusers.d/mptester.conf
else
  for u in mptester mptester-collect; do
    id "$u" >/dev/null 2>&1 || useradd --system --user-group --home-dir "/var/lib/$u" --no-create-home --shell /usr/sbin/nologin "$u"
  done
fi
if command -v systemd-tmpfiles >/dev/null 2>&1; then
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/mptester.conf
else
  install -d -m 0700 -o mptester -g mptester /var/spool/mptester
fi
# Results spooled by an older, root-run agent become the agent user's.
chown -R mptester:mptester /var/spool/mptester
# The probe config (it names the token file) is readable by the agent.
chgrp mptester /etc/mptester/mptester.yaml 2>/dev/null || true
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
