// Slurm's compressed host lists, as in SLURM_JOB_NODELIST: "gpu[01-04,07]", "tux[0-3],login1",
// "rack[1-2]-node[01-02]" (every bracket a set of numbers or ranges, zero padding kept from the
// range's first number). Under srun the job's store lives on the first host of the step.
#pragma once

#include <string>
#include <vector>

namespace comm {

// Every host the list names, in Slurm's order. Throws InvalidArgumentError naming the list and
// what is wrong in it (an unclosed bracket, a range running backwards, a list too long to use).
std::vector<std::string> expand_slurm_nodelist(const std::string& list);

}  // namespace comm
