"""A seccomp filter for skill commands: no setuid/setgid bit, no kernel state of the host's.

A writable skill's folder is the host's own folder, bound read-write into the sandbox.
bubblewrap mounts it ``nosuid`` inside the sandbox, but the host's mount is not: a file a
command makes there with the setuid bit (``chmod u+s``, ``install -m 4755``, an
``open(..., O_CREAT, 04755)``, ``cp -p`` of a setuid program) would run on the host with
the job user's rights (root's, for a job run as root) for as long as it exists. The kernel
refuses it here: every syscall that sets a file's mode (``chmod``, ``fchmod``,
``fchmodat``, ``fchmodat2``, ``open``, ``openat``, ``creat``, ``mknod``, ``mknodat``)
fails with ``EPERM`` when the mode has ``S_ISUID`` or ``S_ISGID``; ``openat2`` (whose mode
is in a struct a filter cannot read) and ``io_uring_setup`` (whose requests bypass syscall
filters) fail with ``ENOSYS``, so callers fall back to ``openat``. Syscalls of another ABI
(x32, 32-bit compat) fail with ``EPERM``.

The kernel's keyrings and its log are no namespace's: a command inherits the session keyring
of the process that started it (the operator's, holding whatever the job user's session
keeps there: Kerberos tickets, ``keyctl`` secrets, file system keys), found by
``keyctl(KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, ...)`` and read whole, in any user
namespace whose uid maps to the key's owner; ``request_key`` can even make the host run
``/sbin/request-key`` outside the sandbox; ``syslog`` reads the host's kernel log where
``kernel.dmesg_restrict`` is 0. ``add_key``, ``request_key``, ``keyctl`` and ``syslog``
fail with ``ENOSYS``, as on a kernel built without them (Docker's default profile refuses
them too).

Three calls no skill command needs open kernel code that local privilege escalations keep
being found in, and a job run as root runs its commands as the host's root: a kernel bug
reached from the sandbox is the host's. ``perf_event_open`` (the CPU's counters: a side
channel on the host's other processes where ``kernel.perf_event_paranoid`` allows it),
``bpf`` (the eBPF verifier, where ``kernel.unprivileged_bpf_disabled`` is 0) and
``userfaultfd`` (used to pause the kernel mid-copy and win its races) fail with ``ENOSYS``,
as Docker's default profile refuses them.

Memory no limit holds: a ``memfd_create`` file or a System V shared memory segment
(``shmget``) holds memory that is in no tmpfs of a size and, once unmapped, in no process's
address space (``RLIMIT_AS``). A command limited to 256 MiB per process held 600 MiB in
memfds; each of its processes could hold any amount, until the host ran out (the OOM killer
then picks a victim, the TaskManager maybe) where no ``memory`` cgroup bounds the command
(a job not run as root). Both fail with ``ENOSYS``; ``shm_open`` (a file in the sandbox's
capped ``/dev/shm``) still works.

No user namespace is made in the sandbox: ``clone`` and ``unshare`` with ``CLONE_NEWUSER``
fail with ``EPERM`` and ``clone3`` (whose flags are in a struct) with ``ENOSYS`` (the C
library falls back to ``clone``). A nested user namespace gives a command every capability
inside it and the kernel code behind them (mounts, netfilter), where local privilege
escalations are found; bubblewrap's ``--disable-userns`` would refuse them too, but puts the
command in a nested user namespace of its own, where the sandbox's tmpfs cannot be bounded
in files (``_tmpfs``).

System V message queues and semaphore sets (``msgget``, ``semget``) fail with ``ENOSYS``
like ``shmget``: each IPC namespace's defaults let one command hold about 500 MB of queued
messages and far more in semaphore arrays, kernel memory no rlimit bounds.

Only Unix sockets are made (``socket`` and ``socketpair`` of another domain fail with
``EAFNOSUPPORT``, as on a kernel built without that family): the sandbox has no network, and
TCP and UDP buffers are counted against the host's ``tcp_mem``/``udp_mem``, shared by every
network namespace: a command filling its own loopback's buffers pushed the host's TCP, the
TaskManager's connections included, into memory pressure. Netlink and packet sockets, kernel
code no command needs, go with them.

No process of the sandbox is traced or read by another: ``ptrace``, ``process_vm_readv``,
``process_vm_writev`` and ``pidfd_getfd`` fail with ``ENOSYS``. bubblewrap's init (pid 1
of the sandbox, which ends the sandbox when the command ends) runs as the command's user: a
command that attached to it and stopped it, then exited, kept the sandbox and everything it
left behind running until the timeout (every command, for its whole timeout, holding its
tool call and its processes).

The filter is a classic BPF program in the binary form ``bwrap --seccomp FD`` loads (the
form libseccomp's ``seccomp_export_bpf`` writes), built here for x86_64 and aarch64;
elsewhere ``seccomp_program`` returns ``None`` (the setuid bits are then cleared when the
command ends only, and the keyrings stay within a command's reach).
"""

from __future__ import annotations

import errno
import platform
import socket
import stat
import struct

__all__ = ["seccomp_program"]

_CLONE_NEWUSER = 0x10000000
_NEWUSER = (0, _CLONE_NEWUSER)  # clone's and unshare's flags: their first argument
# (audit arch, {syscall: index of its mode argument, (index, bits) of an argument refused
# with any of those bits, or None to refuse it outright}); with a mode or flags: chmod,
# fchmod, fchmodat, fchmodat2, open, openat, creat, mknod, mknodat; clone, unshare;
# socket and socketpair of a domain other than AF_UNIX (EAFNOSUPPORT);
# refused outright: openat2, io_uring_setup, add_key, request_key, keyctl, syslog,
# perf_event_open, bpf, userfaultfd, memfd_create, shmget, ptrace, process_vm_readv,
# process_vm_writev, pidfd_getfd, clone3, msgget, semget
_UNIX_ONLY = "unix"  # socket's and socketpair's domain: AF_UNIX only
_Rule = int | tuple[int, int] | str | None
_ARCHES: dict[str, tuple[int, dict[int, _Rule]]] = {
    "x86_64": (0xC000003E, {2: 2, 85: 1, 90: 1, 91: 1, 133: 1, 257: 3, 259: 2, 268: 2,
                            452: 2, 56: _NEWUSER, 272: _NEWUSER, 41: _UNIX_ONLY,
                            53: _UNIX_ONLY, 437: None, 425: None,
                            248: None, 249: None, 250: None, 103: None,
                            298: None, 321: None, 323: None, 319: None, 29: None,
                            101: None, 310: None, 311: None, 438: None, 435: None,
                            68: None, 64: None}),
    "aarch64": (0xC00000B7, {56: 3, 33: 2, 52: 1, 53: 2, 452: 2, 220: _NEWUSER,
                             97: _NEWUSER, 198: _UNIX_ONLY, 199: _UNIX_ONLY, 437: None,
                             425: None,
                             217: None, 218: None, 219: None, 116: None,
                             241: None, 280: None, 282: None, 279: None, 194: None,
                             117: None, 270: None, 271: None, 438: None, 435: None,
                             186: None, 190: None}),
}
_X32_BIT = 0x40000000
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_SET_ID = stat.S_ISUID | stat.S_ISGID


def _arg_offset(index: int) -> int:
    # struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}: the low 32 bits of an
    # argument (both ABIs here are little-endian)
    return 16 + 8 * index


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter, as the array of ``struct sock_filter`` bubblewrap's ``--seccomp`` reads.

    Args:
        machine: ``platform.machine()`` (the default) or another to build for.

    Returns:
        The program's bytes; ``None`` on an architecture it is not built for.
    """
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, calls = arch
    body: list[tuple[int, int, int, int]] = []  # (code, jt, jf, k), jumps fixed below
    # jt/jf of -1 / -2 mean "to ALLOW" / "to DENY", resolved once the length is known
    body.append((_LD_ABS, 0, 0, 4))  # arch
    body.append((_JEQ, 0, -2, audit_arch))
    body.append((_LD_ABS, 0, 0, 0))  # nr
    body.append((_JGE, -2, 0, _X32_BIT))
    for nr, rule in calls.items():
        if rule is None:
            body.append((_JEQ, -3, 0, nr))  # -3: to NOSYS
            continue
        if rule == _UNIX_ONLY:  # -4: to EAFNOSUPPORT
            body += [(_JEQ, 0, 2, nr), (_LD_ABS, 0, 0, _arg_offset(0)),
                     (_JEQ, -1, -4, socket.AF_UNIX)]
            continue
        assert not isinstance(rule, str)
        index, bits = (rule, _SET_ID) if isinstance(rule, int) else rule
        body.append((_JEQ, 0, 2, nr))
        body.append((_LD_ABS, 0, 0, _arg_offset(index)))
        body.append((_JSET, -2, -1, bits))
    allow, deny, nosys, no_family = len(body), len(body) + 1, len(body) + 2, len(body) + 3
    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(body):
        targets = {-1: allow, -2: deny, -3: nosys, -4: no_family}
        jt = targets[jt] - i - 1 if jt < 0 else jt
        jf = targets[jf] - i - 1 if jf < 0 else jf
        out += struct.pack("=HBBI", code, jt, jf, k)
    out += struct.pack("=HBBI", _RET, 0, 0, _ALLOW)
    out += struct.pack("=HBBI", _RET, 0, 0, _ERRNO | errno.EPERM)
    out += struct.pack("=HBBI", _RET, 0, 0, _ERRNO | errno.ENOSYS)
    out += struct.pack("=HBBI", _RET, 0, 0, _ERRNO | errno.EAFNOSUPPORT)
    return bytes(out)
