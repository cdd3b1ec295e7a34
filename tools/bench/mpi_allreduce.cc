// Peer benchmark for tools/bench-allreduce.sh: MPI_Allreduce (Open MPI, run with the TCP BTL
// on loopback). Not part of the tpnode build: the script compiles it with mpicxx. Prints, on
// rank 0, the same JSON as `tpbench allreduce --json`.
//   mpirun -np N mpi_allreduce SIZES(bytes,comma) ITERS_SMALL ITERS_LARGE
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "allreduce_report.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<size_t> sizes;
  std::stringstream ss(argv[1]);
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoull(item));
  const int iters_small = std::stoi(argv[2]), iters_large = std::stoi(argv[3]);
  std::string json = "[";
  for (size_t bytes : sizes) {
    const int n = static_cast<int>(bytes / sizeof(float));
    std::vector<float> buf(n, 0.0f);  // allocated and touched once, reused every iteration
    const int iters = bytes >= (1u << 20) ? iters_large : iters_small;
    for (int i = 0; i < iters / 10 + 2; ++i) {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<double> us;
    for (int i = 0; i < iters; ++i) {
      const double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      us.push_back((MPI_Wtime() - t0) * 1e6);
    }
    appendAllReduceResult(json, bytes, us, size);
  }
  if (rank == 0) std::printf("%s]\n", json.c_str());
  MPI_Finalize();
  return 0;
}
