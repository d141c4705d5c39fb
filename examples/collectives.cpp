// collectives: the six collectives of the tutorials, with their inputs, one after the other.
//   commrun -n 4 build/examples/collectives
// reduce: every rank holds [1]; rank 0 ends with [4] (on 4 ranks).
// all_reduce: every rank holds [1]; every rank ends with [4].
// scatter: rank 0 holds [1], [2], [3], [4]; rank r receives [r + 1].
// gather: rank r holds [r]; rank 0 ends with [0], [1], [2], [3].
// all_gather: rank r holds [r]; every rank ends with [0], [1], [2], [3].
// broadcast: rank 0 holds [0], the others [r]; every rank ends with [0].
#include <comm/comm.hpp>

#include "show.hpp"

int main() try {
  auto group = comm::init_process_group();
  int rank = group->rank(), size = group->size();
  std::string me = "[" + std::to_string(rank) + "] ";

  std::vector<float> ones{1.0f};
  group->reduce(ones, 0, comm::ReduceOp::Sum);
  if (rank == 0) say(me + "reduce: " + show(ones));

  std::vector<float> all{1.0f};
  group->all_reduce(all, comm::ReduceOp::Sum);
  say(me + "all_reduce: " + show(all));

  std::vector<float> piece{0.0f};
  std::vector<std::vector<float>> pieces;
  std::vector<comm::Buffer> to_scatter;
  if (rank == 0) {
    for (int r = 0; r < size; ++r) pieces.push_back({static_cast<float>(r + 1)});
    for (auto& p : pieces) to_scatter.emplace_back(p);
  }
  group->scatter(piece, to_scatter, 0);
  say(me + "scatter: " + show(piece));

  std::vector<float> mine{static_cast<float>(rank)};
  std::vector<std::vector<float>> gathered(rank == 0 ? size : 0, std::vector<float>(1));
  std::vector<comm::Buffer> gather_into;
  for (auto& g : gathered) gather_into.emplace_back(g);
  group->gather(mine, gather_into, 0);
  if (rank == 0) {
    std::vector<float> flat;
    for (auto& g : gathered) flat.push_back(g[0]);
    say(me + "gather: " + show(flat));
  }

  std::vector<float> everyone(size);
  group->all_gather(everyone, mine);
  say(me + "all_gather: " + show(everyone));

  std::vector<float> value{static_cast<float>(rank)};
  group->broadcast(value, 0);
  say(me + "broadcast: " + show(value));
  return 0;
} catch (const comm::Error& error) {
  std::cerr << error.what() << "\n";
  return 1;
}
