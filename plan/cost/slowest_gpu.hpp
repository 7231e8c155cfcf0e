// GPUs of one model are not equally fast: chip-to-chip and power-management differences give each GPU
// its own sustained speed (DeviceSpec::speed_cv). A synchronous step waits for its slowest rank at every
// collective, so a job of many GPUs computes at the pace of its slowest one: the expected largest of the
// GPUs' time factors, which grows with the job (docs/plans-and-cost-model.md, "The slowest GPU").
#pragma once

namespace paratwin::cost {

// The expected largest of `gpus` independent lognormal time factors of mean 1 and coefficient of
// variation `cv` (the same law as a scenario's variability.ranks): 1 for one GPU or no spread.
// Numerical quadrature over the standard normal, within 1e-6 of the exact expectation.
double expected_slowest(int gpus, double cv);

}  // namespace paratwin::cost
