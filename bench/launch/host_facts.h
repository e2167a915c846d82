/*
 * host_facts.h — what each rank knows of its own host and GPU (host name,
 * local rank, GPU UUID, PCI bus id, SM clocks, power limit), packed into a
 * fixed-size message that every rank sends to rank 0 over the job's
 * rendezvous, so that rank 0 alone records the run's system (the database
 * is rank 0's). Also the other pure pieces of the system record: reading
 * nvidia-smi's query line and picking the environment worth recording.
 * Nothing here touches CUDA.
 */
#ifndef TP_HOST_FACTS_H
#define TP_HOST_FACTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"

typedef struct tp_host_facts {
  int32_t rank, local_rank;
  int32_t sm_clock_mhz;     /* the SM clock now; 0: unknown */
  int32_t max_sm_clock_mhz; /* 0: unknown */
  int32_t power_limit_mw;   /* enforced power limit in milliwatts; 0: unknown */
  char host[256];
  char gpu_uuid[64];   /* "GPU-8f2c..." as nvidia-smi writes it; "" unknown */
  char pci_bus_id[32]; /* "0000:19:00.0"; "" unknown */
} tp_host_facts;

/* Bytes of a packed tp_host_facts: "TPHF", a version byte, three zero
 * bytes, five little-endian int32, then the three strings, each in its
 * field's full width, NUL-padded. */
enum { TP_HOST_FACTS_WIRE = 8 + 5 * 4 + 256 + 64 + 32 };

/* Packs f into buf (TP_HOST_FACTS_WIRE bytes). */
void tp_host_facts_pack(const tp_host_facts *f, unsigned char buf[TP_HOST_FACTS_WIRE]);

/* Unpacks a message of len bytes into *out. TP_EIO naming what is wrong: a wrong length, magic or
 * version, a string without its NUL or with control characters, a negative number. */
TP_MUST_CHECK tp_rc tp_host_facts_unpack(const unsigned char *buf, size_t len, tp_host_facts *out);

/* Reads one line of `nvidia-smi --query-gpu=uuid,pci.bus_id,clocks.sm,
 * clocks.max.sm,power.limit --format=csv,noheader,nounits` into the GPU
 * fields of *f ("[N/A]" and "[Not Supported]" leave a field unknown; the
 * PCI bus id is taken in nvidia-smi's 8-digit domain form and written as
 * CUDA writes it, "0000:19:00.0"). TP_EUSAGE for a line of another shape. */
TP_MUST_CHECK tp_rc tp_host_facts_parse_smi(const char *line, tp_host_facts *f);

/* The environment variables whose names start with NCCL_, CUDA_ or TORCH_,
 * sorted by name, one "NAME=value" a line (a value's control characters
 * written as '?'), in a malloc'd string ("" when none; NULL out of memory).
 * env is NULL-terminated, as environ. */
char *tp_host_facts_environment(char *const *env);

#endif /* TP_HOST_FACTS_H */
