#!/usr/bin/env bash
# A real single-node SLURM cluster on loopback, for the SLURM test tier.
#   cluster.sh start STATE_DIR   start munged, slurmctld and slurmd; wait until the node is idle
#   cluster.sh stop STATE_DIR    cancel the test cluster's jobs, stop exactly the daemons that start launched, by PID
# Needs root and Debian's slurm-wlm and munge packages. Files live in STATE_DIR; /etc/slurm/slurm.conf
# and gres.conf become links to them while the cluster runs (jobs cannot use SLURM_CONF: the
# Snakemake SLURM plugin clears SLURM_* variables inside jobs), and stop restores what was there.
set -euo pipefail
action=$1
state=$(realpath -m "$2")

stop() {
  [ -s "$state/slurmctld.pid" ] && scancel --full --user "$(id -un)" 2>/dev/null || true  # a tier cut short
  for daemon in slurmd slurmctld munged; do
    pidfile="$state/$daemon.pid"
    [ -s "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
  for file in slurm.conf gres.conf; do
    if [ -L "/etc/slurm/$file" ] && [ "$(readlink "/etc/slurm/$file")" = "$state/$file" ]; then
      rm "/etc/slurm/$file"
      if [ -e "$state/$file.saved" ]; then mv "$state/$file.saved" "/etc/slurm/$file"; fi
    fi
  done
}

start() {
  for daemon in munged slurmctld slurmd; do
    if pgrep -x "$daemon" >/dev/null; then
      echo "a $daemon is already running (pid $(pgrep -x "$daemon" | head -1)); stop it before starting a test cluster" >&2
      return 1
    fi
  done
  trap stop ERR
  mkdir -p "$state"/{slurmctld,slurmd}
  host=$(hostname -s)
  node=$(slurmd -C | head -1 | sed 's/^NodeName=[^ ]* //')
  cat > "$state/slurm.conf" <<CONF
ClusterName=ctxvar-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=86400  # scontrol shows a finished job for the whole tier, whose runs go side by side
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
DefMemPerCPU=500
GresTypes=gpu
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmdSpoolDir=$state/slurmd
StateSaveLocation=$state/slurmctld
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 Gres=gpu:1 $node State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  echo "NodeName=$host Name=gpu File=/dev/null Count=1" > "$state/gres.conf"
  mkdir -p /etc/slurm
  for file in slurm.conf gres.conf; do
    [ -e "/etc/slurm/$file" ] && [ ! -L "/etc/slurm/$file" ] && mv "/etc/slurm/$file" "$state/$file.saved"
    ln -sfn "$state/$file" "/etc/slurm/$file"
  done
  munged --force --socket="$state/munge.socket" --pid-file="$state/munged.pid" \
    --log-file="$state/munged.log" --seed-file="$state/munged.seed"
  slurmctld
  slurmd
  for _ in $(seq 100); do
    if [ "$(sinfo -h -o %T 2>/dev/null)" = "idle" ] && [ -s "$state/slurmctld.pid" ] && [ -s "$state/slurmd.pid" ]; then
      trap - ERR
      return 0
    fi
    sleep 0.2
  done
  echo "slurm node did not become idle: $(sinfo 2>&1)" >&2
  stop
  return 1
}

case $action in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop STATE_DIR" >&2; exit 2 ;;
esac
