/* Every collective of comm/comm.h on host buffers, with every datatype and (for the reductions)
 * every op, at counts 0, 1, 7 and 1000 (and a large float32 all_reduce), in place and out of
 * place as NCCL lays them out, against references computed here in double from every rank's
 * inputs. Also: out-of-place inputs are left alone, a reduce leaves non-roots' recvbuff alone,
 * a bitwise op on floating-point data and an avg of bool are refused on every rank.
 *
 *   commrun -n 3 build/tests/c/test_c_collectives
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

static const comm_op_t all_ops[] = {COMM_SUM, COMM_PRODUCT, COMM_MAX, COMM_MIN,
                                    COMM_AVG, COMM_BAND,    COMM_BOR, COMM_BXOR};
static const char* const op_names[] = {"sum", "product", "max", "min", "avg", "band", "bor", "bxor"};
static const size_t counts[] = {0, 1, 7, 1000};
#define COUNT_KINDS (sizeof counts / sizeof counts[0])

static int rank, size;
static comm_t comm;

static void* buffer_of(comm_datatype_t datatype, size_t count) {
  return calloc(count ? count : 1, datatype_size(datatype));
}

static void fill(comm_datatype_t datatype, comm_op_t op, void* buffer, int r, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) store_value(datatype, buffer, i, reduction_input(datatype, op, r, i));
}

static void fill_sentinel(comm_datatype_t datatype, void* buffer, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) store_value(datatype, buffer, i, datatype == COMM_BOOL ? 1 : 77);
}

/* The first wrong element of a buffer that should hold `expected(i)`, or -1. */
static long first_wrong_input(comm_datatype_t datatype, comm_op_t op, const void* buffer, int r, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) {
    if (load_value(datatype, buffer, i) != round_to(datatype, reduction_input(datatype, op, r, i))) return (long)i;
  }
  return -1;
}

static void check_reductions(comm_datatype_t datatype, comm_op_t op, size_t count, int in_place) {
  const char* how = in_place ? "in place" : "out of place";
  const char* name = datatype_name(datatype);
  const char* op_name = op_names[op];
  int bool_average = datatype == COMM_BOOL && op == COMM_AVG;
  int refused = (datatype_is_float(datatype) && op_is_bitwise(op)) || bool_average;
  const char* refusal = bool_average ? "avg of dtype bool" : "bitwise";
  int root = size - 1;
  size_t i;
  void* send = buffer_of(datatype, count * (size_t)size);
  void* receive = buffer_of(datatype, count * (size_t)size);
  comm_result_t result;

  /* all_reduce */
  fill(datatype, op, send, rank, count);
  fill_sentinel(datatype, receive, count);
  result = comm_all_reduce(send, in_place ? send : receive, count, datatype, op, comm, NULL);
  if (refused) {
    CHECK(result == COMM_INVALID_ARGUMENT && strstr(comm_get_last_error(comm), refusal) != NULL,
          "all_reduce %s %s: %s, %s", name, op_name, comm_get_error_string(result), comm_get_last_error(comm));
  } else {
    CHECK(result == COMM_SUCCESS, "all_reduce %s %s %zu %s: %s", name, op_name, count, how, comm_get_last_error(comm));
    for (i = 0; i < count; ++i) {
      double got = load_value(datatype, in_place ? send : receive, i);
      if (!reduction_matches(datatype, op, got, reduction_result(datatype, op, size, i))) {
        CHECK(0, "all_reduce %s %s %zu %s: [%zu] = %g, expected %g", name, op_name, count, how, i, got,
              reduction_result(datatype, op, size, i));
        break;
      }
    }
    if (!in_place) CHECK(first_wrong_input(datatype, op, send, rank, count) < 0, "all_reduce changed sendbuff");
  }

  /* reduce: the root gets the result; the others' recvbuff stays as it was */
  fill(datatype, op, send, rank, count);
  fill_sentinel(datatype, receive, count);
  result = comm_reduce(send, in_place ? send : receive, count, datatype, op, root, comm, NULL);
  if (!refused) {
    CHECK(result == COMM_SUCCESS, "reduce %s %s %zu %s: %s", name, op_name, count, how, comm_get_last_error(comm));
    for (i = 0; i < count; ++i) {
      const void* looked = in_place ? send : receive;
      double got = load_value(datatype, looked, i);
      double want = rank == root
                        ? reduction_result(datatype, op, size, i)
                        : (in_place ? reduction_input(datatype, op, rank, i) : (datatype == COMM_BOOL ? 1 : 77));
      if (rank == root ? !reduction_matches(datatype, op, got, want) : got != round_to(datatype, want)) {
        CHECK(0, "reduce %s %s %zu %s on rank %d: [%zu] = %g, expected %g", name, op_name, count, how, rank, i, got,
              want);
        break;
      }
    }
    if (!in_place) CHECK(first_wrong_input(datatype, op, send, rank, count) < 0, "reduce changed sendbuff");
  }

  /* reduce_scatter: block r of every rank's input, reduced, to rank r (in place: recvbuff is
   * this rank's block of sendbuff) */
  for (i = 0; i < count * (size_t)size; ++i) store_value(datatype, send, i, reduction_input(datatype, op, rank, i));
  fill_sentinel(datatype, receive, count);
  {
    char* own_block = (char*)send + (size_t)rank * count * datatype_size(datatype);
    void* output = in_place ? (void*)own_block : receive;
    result = comm_reduce_scatter(send, output, count, datatype, op, comm, NULL);
    if (!refused) {
      CHECK(result == COMM_SUCCESS, "reduce_scatter %s %s %zu %s: %s", name, op_name, count, how,
            comm_get_last_error(comm));
      for (i = 0; i < count; ++i) {
        double got = load_value(datatype, output, i);
        double want = reduction_result(datatype, op, size, (size_t)rank * count + i);
        if (!reduction_matches(datatype, op, got, want)) {
          CHECK(0, "reduce_scatter %s %s %zu %s: [%zu] = %g, expected %g", name, op_name, count, how, i, got, want);
          break;
        }
      }
      if (!in_place) {
        CHECK(first_wrong_input(datatype, op, send, rank, count * (size_t)size) < 0, "reduce_scatter changed sendbuff");
      }
    }
  }
  free(send);
  free(receive);
}

/* Rank r's element i for the data-moving collectives: says where it came from. */
static double moved_value(comm_datatype_t datatype, int r, size_t i) {
  if (datatype == COMM_BOOL) return (i + (size_t)r) % 2;
  return (double)((i * 3 + (size_t)r * 5) % (datatype == COMM_INT8 ? 100 : 200));
}

static long first_wrong_moved(comm_datatype_t datatype, const void* buffer, size_t at, int r, size_t first,
                              size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) {
    if (load_value(datatype, buffer, at + i) != round_to(datatype, moved_value(datatype, r, first + i))) return (long)i;
  }
  return -1;
}

static void check_data_movement(comm_datatype_t datatype, size_t count, int in_place) {
  const char* how = in_place ? "in place" : "out of place";
  const char* name = datatype_name(datatype);
  size_t total = count * (size_t)size, element = datatype_size(datatype), i;
  char* send = buffer_of(datatype, total);
  char* receive = buffer_of(datatype, total);
  int root = (int)(count % (size_t)size), r;
  long wrong;

  /* broadcast: the root's sendbuff (in place: its recvbuff) reaches every recvbuff */
  fill_sentinel(datatype, send, count);
  fill_sentinel(datatype, receive, count);
  if (rank == root) {
    for (i = 0; i < count; ++i) store_value(datatype, send, i, moved_value(datatype, root, i));
  }
  CHECK_OK(comm_broadcast(send, in_place ? send : receive, count, datatype, root, comm, NULL));
  wrong = first_wrong_moved(datatype, in_place ? send : receive, 0, root, 0, count);
  CHECK(wrong < 0, "broadcast %s %zu %s from %d: wrong at %ld", name, count, how, root, wrong);

  /* all_gather: in place, this rank's input is already block rank of recvbuff */
  fill_sentinel(datatype, receive, total);
  {
    char* input = in_place ? receive + (size_t)rank * count * element : send;
    for (i = 0; i < count; ++i) store_value(datatype, input, i, moved_value(datatype, rank, i));
    CHECK_OK(comm_all_gather(input, receive, count, datatype, comm, NULL));
  }
  for (r = 0; r < size; ++r) {
    wrong = first_wrong_moved(datatype, receive, (size_t)r * count, r, 0, count);
    CHECK(wrong < 0, "all_gather %s %zu %s: block %d wrong at %ld", name, count, how, r, wrong);
  }

  /* all_to_all: block p of rank r's input carries (r, p * count + i) */
  for (i = 0; i < total; ++i) store_value(datatype, send, i, moved_value(datatype, rank, i));
  fill_sentinel(datatype, receive, total);
  CHECK_OK(comm_all_to_all(send, in_place ? send : receive, count, datatype, comm, NULL));
  for (r = 0; r < size; ++r) {
    wrong = first_wrong_moved(datatype, in_place ? send : receive, (size_t)r * count, r, (size_t)rank * count, count);
    CHECK(wrong < 0, "all_to_all %s %zu %s: block from %d wrong at %ld", name, count, how, r, wrong);
  }

  if (!in_place) {
    /* gather to root, scatter from root */
    for (i = 0; i < count; ++i) store_value(datatype, send, i, moved_value(datatype, rank, i));
    fill_sentinel(datatype, receive, total);
    CHECK_OK(comm_gather(send, rank == root ? receive : NULL, count, datatype, root, comm, NULL));
    if (rank == root) {
      for (r = 0; r < size; ++r) {
        wrong = first_wrong_moved(datatype, receive, (size_t)r * count, r, 0, count);
        CHECK(wrong < 0, "gather %s %zu: block %d wrong at %ld", name, count, r, wrong);
      }
    }
    for (i = 0; i < total; ++i) store_value(datatype, send, i, moved_value(datatype, root, i));
    fill_sentinel(datatype, receive, count);
    CHECK_OK(comm_scatter(rank == root ? send : NULL, receive, count, datatype, root, comm, NULL));
    wrong = first_wrong_moved(datatype, receive, 0, root, (size_t)rank * count, count);
    CHECK(wrong < 0, "scatter %s %zu: wrong at %ld", name, count, wrong);

    /* send and receive around the ring, in a group so that the order does not matter */
    for (i = 0; i < count; ++i) store_value(datatype, send, i, moved_value(datatype, rank, i));
    fill_sentinel(datatype, receive, count);
    CHECK_OK(comm_group_start());
    CHECK_OK(comm_send(send, count, datatype, (rank + 1) % size, comm, NULL));
    CHECK_OK(comm_recv(receive, count, datatype, (rank + size - 1) % size, comm, NULL));
    CHECK_OK(comm_group_end());
    wrong = first_wrong_moved(datatype, receive, 0, (rank + size - 1) % size, 0, count);
    CHECK(wrong < 0, "send/recv %s %zu: wrong at %ld", name, count, wrong);
  }
  free(send);
  free(receive);
}

static void check_large_all_reduce(void) {
  size_t count = 300001, i;
  float* data = malloc(count * sizeof *data);
  for (i = 0; i < count; ++i) data[i] = (float)((i + (size_t)rank) % 17);
  CHECK_OK(comm_all_reduce(data, data, count, COMM_FLOAT32, COMM_SUM, comm, NULL));
  for (i = 0; i < count; ++i) {
    double want = 0;
    int r;
    for (r = 0; r < size; ++r) want += (double)((i + (size_t)r) % 17);
    if (data[i] != (float)want) {
      CHECK(0, "large all_reduce: [%zu] = %g, expected %g", i, data[i], want);
      break;
    }
  }
  free(data);
}

/* all_to_all_v: rank f sends rank t (f + 2t + c) % 4 blocks of 5 elements (zeros included), every
 * element checked against what its sender wrote; NULL counts are refused. */
static size_t uneven(int from, int to, int c) { return (size_t)((from + 2 * to + c) % 4) * 5; }

static void check_all_to_all_v(comm_datatype_t datatype, int c) {
  size_t* sendcounts = calloc((size_t)size, sizeof(size_t));
  size_t* recvcounts = calloc((size_t)size, sizeof(size_t));
  size_t sent = 0, received = 0, at = 0, i;
  int r;
  void *send, *receive;
  long wrong = -1;
  for (r = 0; r < size; ++r) {
    sendcounts[r] = uneven(rank, r, c);
    recvcounts[r] = uneven(r, rank, c);
    sent += sendcounts[r];
    received += recvcounts[r];
  }
  send = buffer_of(datatype, sent);
  receive = buffer_of(datatype, received);
  for (r = 0; r < size; ++r) {
    for (i = 0; i < sendcounts[r]; ++i) store_value(datatype, send, at + i, (double)((rank * 7 + r * 3 + (int)i) % 100));
    at += sendcounts[r];
  }
  CHECK_OK(comm_all_to_all_v(send, sendcounts, receive, recvcounts, datatype, comm, NULL));
  at = 0;
  for (r = 0; r < size; ++r) {
    for (i = 0; i < recvcounts[r] && wrong < 0; ++i) {
      if (load_value(datatype, receive, at + i) != round_to(datatype, (double)((r * 7 + rank * 3 + (int)i) % 100)))
        wrong = (long)(at + i);
    }
    at += recvcounts[r];
  }
  CHECK(wrong < 0, "all_to_all_v %s: element %ld is wrong", datatype_name(datatype), wrong);
  CHECK(comm_all_to_all_v(send, NULL, receive, recvcounts, datatype, comm, NULL) == COMM_INVALID_ARGUMENT,
        "all_to_all_v with NULL sendcounts is refused");
  free(send);
  free(receive);
  free(sendcounts);
  free(recvcounts);
}

/* all_gather_v: rank r brings (r + c) % 3 * 7 elements (zeros included). */
static void check_all_gather_v(comm_datatype_t datatype, int c) {
  size_t* recvcounts = calloc((size_t)size, sizeof(size_t));
  size_t total = 0, at = 0, i;
  int r;
  long wrong = -1;
  void *send, *receive;
  for (r = 0; r < size; ++r) {
    recvcounts[r] = (size_t)((r + c) % 3) * 7;
    total += recvcounts[r];
  }
  send = buffer_of(datatype, recvcounts[rank]);
  receive = buffer_of(datatype, total);
  for (i = 0; i < recvcounts[rank]; ++i) store_value(datatype, send, i, (double)((rank * 11 + (int)i) % 100));
  CHECK_OK(comm_all_gather_v(send, recvcounts[rank], receive, recvcounts, datatype, comm, NULL));
  for (r = 0; r < size; ++r) {
    for (i = 0; i < recvcounts[r] && wrong < 0; ++i) {
      if (load_value(datatype, receive, at + i) != round_to(datatype, (double)((r * 11 + (int)i) % 100)))
        wrong = (long)(at + i);
    }
    at += recvcounts[r];
  }
  CHECK(wrong < 0, "all_gather_v %s: element %ld is wrong", datatype_name(datatype), wrong);
  free(send);
  free(receive);
  free(recvcounts);
}

/* reduce_scatter_v (sum and max), gather_v and scatter_v with rank r's block (r + c) % 3 * 7
 * elements (zeros included), the root c % size; off the root gather_v's recvbuff and
 * scatter_v's sendbuff are NULL, as MPI allows. */
static void check_rooted_and_reducing_v(comm_datatype_t datatype, int c) {
  size_t ranks = size > 0 ? (size_t)size : 1;
  size_t* counts_of_ranks = calloc(ranks, sizeof(size_t));
  size_t* at = calloc(ranks + 1, sizeof(size_t));
  size_t i, mine;
  int r, o, root = c % size;
  long wrong = -1;
  void *send, *receive;
  for (r = 0; r < size; ++r) {
    counts_of_ranks[r] = (size_t)((r + c) % 3) * 7;
    at[r + 1] = at[r] + counts_of_ranks[r];
  }
  mine = counts_of_ranks[rank];
  for (o = 0; o < 2; ++o) {
    comm_op_t op = o == 0 ? COMM_SUM : COMM_MAX;
    send = buffer_of(datatype, at[size]);
    receive = buffer_of(datatype, mine);
    fill(datatype, op, send, rank, at[size]);
    CHECK_OK(comm_reduce_scatter_v(send, receive, counts_of_ranks, datatype, op, comm, NULL));
    for (i = 0; i < mine && wrong < 0; ++i) {
      if (!reduction_matches(datatype, op, load_value(datatype, receive, i),
                             reduction_result(datatype, op, size, at[rank] + i)))
        wrong = (long)i;
    }
    CHECK(wrong < 0, "reduce_scatter_v %s %s: element %ld is wrong", datatype_name(datatype), op_names[op], wrong);
    free(send);
    free(receive);
  }
  send = buffer_of(datatype, mine);
  receive = rank == root ? buffer_of(datatype, at[size]) : NULL;
  for (i = 0; i < mine; ++i) store_value(datatype, send, i, (double)((rank * 11 + (int)i) % 100));
  CHECK_OK(comm_gather_v(send, mine, receive, counts_of_ranks, datatype, root, comm, NULL));
  for (r = 0; rank == root && r < size; ++r) {
    for (i = 0; i < counts_of_ranks[r] && wrong < 0; ++i) {
      if (load_value(datatype, receive, at[r] + i) != round_to(datatype, (double)((r * 11 + (int)i) % 100)))
        wrong = (long)(at[r] + i);
    }
  }
  CHECK(wrong < 0, "gather_v %s: element %ld is wrong", datatype_name(datatype), wrong);
  free(send);
  free(receive);
  send = rank == root ? buffer_of(datatype, at[size]) : NULL;
  receive = buffer_of(datatype, mine);
  for (r = 0; rank == root && r < size; ++r) {
    for (i = 0; i < counts_of_ranks[r]; ++i) store_value(datatype, send, at[r] + i, (double)((r * 13 + (int)i) % 100));
  }
  CHECK_OK(comm_scatter_v(send, counts_of_ranks, receive, mine, datatype, root, comm, NULL));
  for (i = 0; i < mine && wrong < 0; ++i) {
    if (load_value(datatype, receive, i) != round_to(datatype, (double)((rank * 13 + (int)i) % 100))) wrong = (long)i;
  }
  CHECK(wrong < 0, "scatter_v %s: element %ld is wrong", datatype_name(datatype), wrong);
  CHECK(comm_scatter_v(send, NULL, receive, mine, datatype, root, comm, NULL) == COMM_INVALID_ARGUMENT,
        "scatter_v with NULL sendcounts is refused");
  free(send);
  free(receive);
  free(counts_of_ranks);
  free(at);
}

int main(void) {
  size_t t, o, c;
  int in_place;
  comm = check_init_from_environment(&rank, &size);
  for (t = 0; t < all_datatype_count; ++t) {
    for (c = 0; c < COUNT_KINDS; ++c) {
      for (in_place = 0; in_place < 2; ++in_place) {
        for (o = 0; o < sizeof all_ops / sizeof all_ops[0]; ++o) {
          check_reductions(all_datatypes[t], all_ops[o], counts[c], in_place);
        }
        check_data_movement(all_datatypes[t], counts[c], in_place);
      }
    }
  }
  check_large_all_reduce();
  for (t = 0; t < all_datatype_count; ++t) {
    for (c = 0; c < 3; ++c) {
      check_all_to_all_v(all_datatypes[t], (int)c);
      check_all_gather_v(all_datatypes[t], (int)c);
      check_rooted_and_reducing_v(all_datatypes[t], (int)c);
    }
  }
  CHECK_OK(comm_barrier(comm, NULL));
  CHECK_OK(comm_destroy(comm));
  return check_summary("C API collectives");
}
