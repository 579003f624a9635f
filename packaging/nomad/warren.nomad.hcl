# warren as the node agent of a fleet on Nomad: a system job runs one daemon
# on every eligible client, all of them nodes of one fleet over an external
# etcd (docs/FLEET.md, "Recipes"). Run it with
#   nomad job run -var 'image=registry.example.com/warren:VERSION' \
#     -var 'etcd=http://10.0.0.11:2379,http://10.0.0.12:2379,http://10.0.0.13:2379' \
#     warren.nomad.hcl
# The Docker driver must allow privileged containers and host volumes, in the
# client's configuration:
#   plugin "docker" { config { allow_privileged = true  volumes { enabled = true } } }
#
# Why each privilege (docs/FLEET.md explains them at more length):
# - privileged: a sandbox is made of user, mount, PID, network, UTS and IPC
#   namespaces, overlay and bind mounts, cgroups and nftables rules, which
#   need the capabilities and the writable cgroupfs that only a privileged
#   container has. warren gives every sandbox its own seccomp profile,
#   capability set and no_new_privs.
# - network_mode "host": the other nodes reach this one at the client's
#   address (WARREN_FLEET_ADVERTISE), and sessions' links and egress rules go
#   in the client's network namespace, as on a machine without Nomad.
# - pid_mode stays the container's own (no "host"): sandboxes are the
#   daemon's children there and end with the task, so the task stops with
#   WARREN_SHUTDOWN=destroy and deletes its sessions (their records leave
#   the registry, their quota comes back).
# - /var/lib/warren (a host path): images, sessions' layers, the SQLite
#   store and the node's admin key live on the client's filesystem; overlayfs
#   cannot use the container's root as an upper layer.
# - /run/warren (a host path): the host-wide registry of sandboxes' uid and
#   gid blocks, shared with any other warren on the machine.
# - cgroups: no host path. A privileged container gets a writable cgroupfs
#   of its own cgroup namespace; warren, at its root, moves itself into a
#   leaf and nests its sessions' cgroups beside it (docs/VM.md), so the
#   task's cgroup holds every sandbox: size the task's resources for
#   max_sessions sandboxes, or reserve the room on the client.
#
# Without containers, the raw_exec driver runs the binary as on a machine
# with systemd (driver = "raw_exec", config { command = "/usr/local/bin/warren"
# args = ["serve"] }); sessions then outlive the task and WARREN_SHUTDOWN may
# stay "keep".

variable "image" {
  type        = string
  description = "container image holding the warren binary at /usr/local/bin/warren"
}

variable "etcd" {
  type        = string
  description = "the fleet's etcd client URLs, comma-separated"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

job "warren" {
  datacenters = var.datacenters
  type        = "system"

  # Only clients meant for sandboxes: set meta { warren = "true" } in their
  # client configuration.
  constraint {
    attribute = "${meta.warren}"
    value     = "true"
  }

  update {
    # One node at a time: its sessions end with its task. Drain it first
    # (warren node drain NODE) to let them finish.
    max_parallel = 1
    min_healthy_time = "10s"
    healthy_deadline = "5m"
  }

  group "warren" {
    network {
      mode = "host"
      port "api" {
        static = 7433
      }
    }

    service {
      name     = "warren"
      port     = "api"
      provider = "nomad"

      check {
        type     = "http"
        path     = "/readyz"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "warren" {
      driver = "docker"

      # Deleting many sessions at a stop takes a while (packaging/warren.service
      # gives systemd 120 s for the same). The client caps it at its
      # max_kill_timeout (30 s by default): raise that too.
      kill_timeout = "120s"

      config {
        image        = var.image
        command      = "/usr/local/bin/warren"
        args         = ["serve"]
        privileged   = true
        network_mode = "host"
        ports        = ["api"]
        volumes = [
          "/var/lib/warren:/var/lib/warren",
          "/run/warren:/run/warren",
        ]
      }

      env {
        WARREN_FLEET_ETCD       = var.etcd
        WARREN_FLEET_NODE       = "${node.unique.name}"
        WARREN_LISTEN           = "${NOMAD_IP_api}:7433"
        WARREN_FLEET_ADVERTISE  = "http://${NOMAD_IP_api}:7433"
        WARREN_FLEET_PREFIX     = "/warren/fleet/"
        WARREN_FLEET_NODE_TTL   = "10s"
        WARREN_FLEET_LOST_GRACE = "5m"
        WARREN_MAX_SESSIONS     = "100"
        WARREN_SHUTDOWN         = "destroy"
        WARREN_DATA_DIR         = "/var/lib/warren"
        WARREN_LOG_FORMAT       = "json"
      }

      resources {
        # The task's cgroup holds the daemon and every sandbox (each with
        # its own limits, from warren's session and tenant settings), and
        # Docker makes memory a hard limit on it: size memory for the
        # sandboxes the node runs at once (max_sessions times their memory),
        # not for the daemon alone (about 100 MiB).
        cpu    = 2000
        memory = 16384
      }
    }
  }
}
