/*
 * tp_window_probe.cu — whether a communicator supports NCCL symmetric
 * memory (tp_window_probe.h), asked the way NCCL's device API allows: a
 * device communicator with no requirements is created and destroyed again.
 * ncclDevCommCreate refuses ("Communicator does not support symmetric
 * memory!") exactly where ncclCommWindowRegister would quietly hand back a
 * local registration (v2.28 src/dev_runtime.cc). Host code only.
 */
#include "kernels/tp_window_probe.h"

#include <stdio.h>
#include <string.h>

#include <nccl_device.h>

/* NCCL fills the whole struct of its own version; a newer runtime's may be
 * larger than this header's, so it is written into room to spare. */
typedef union dev_comm_room {
  ncclDevComm_t comm;
  unsigned char bytes[16384];
} dev_comm_room;

/* Requirements all zero: no barriers, no resources, no multimem, no GIN.
 * The room past this header's struct stays zero for a newer runtime too. */
typedef union requirements_room {
  ncclDevCommRequirements_t reqs;
  unsigned char bytes[4096];
} requirements_room;

static void last_error(ncclComm_t comm, char *why, size_t cap) {
  const char *text = ncclGetLastError(comm);
  snprintf(why, cap, "%s", text ? text : "");
}

extern "C" ncclResult_t tp_window_probe_nccl(ncclComm_t comm, int *lsa_size, char *why,
                                             size_t cap) {
  requirements_room reqs;
  dev_comm_room room;
  memset(&reqs, 0, sizeof reqs);
  memset(&room, 0, sizeof room);
  if (cap) why[0] = '\0';
  if (lsa_size) *lsa_size = 0;
  ncclResult_t r = ncclDevCommCreate(comm, &reqs.reqs, &room.comm);
  if (r != ncclSuccess) {
    last_error(comm, why, cap);
    return r;
  }
  if (lsa_size) *lsa_size = room.comm.lsaSize;
  r = ncclDevCommDestroy(comm, &room.comm);
  if (r != ncclSuccess) last_error(comm, why, cap);
  return r;
}
