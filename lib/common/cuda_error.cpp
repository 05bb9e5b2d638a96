#include "lib/common/cuda_error.hpp"

#include <fmt/format.h>

namespace scout {

namespace {

std::string runtime_name(int runtime_version) {
  if (runtime_version <= 0) return "this scout's CUDA runtime";
  return fmt::format("CUDA runtime {}.{}", runtime_version / 1000, (runtime_version % 1000) / 10);
}

}  // namespace

CudaErrorAdvice cuda_error_advice(int code) {
  using namespace cuda_code;
  const std::string check_gpu = "check `nvidia-smi` on this machine";
  switch (code) {
    case memory_allocation:
      return {ExitCode::unavailable, "the GPU is out of memory",
              "free GPU memory (other processes on the GPU: nvidia-smi), use a smaller size, or run on the CPU"};
    case no_device:
      return {ExitCode::unavailable, "the CUDA driver finds no GPU on this machine",
              "run on a machine with an NVIDIA GPU, check CUDA_VISIBLE_DEVICES, or run on the CPU"};
    case invalid_device:
      return {ExitCode::unavailable, "the GPU index asked for does not exist here",
              "check CUDA_VISIBLE_DEVICES and the device index against nvidia-smi"};
    case insufficient_driver:
      return {ExitCode::unavailable,
              "no CUDA driver was found, or the installed driver is older than the CUDA runtime scout was built with",
              "install the NVIDIA driver (CUDA 13 needs driver >= 580, nvidia-smi shows its version), or run on the "
              "CPU"};
    case call_requires_newer_driver:
      return {ExitCode::unavailable, "the installed driver is too old for a CUDA call scout makes",
              "update the NVIDIA driver to the one of scout's CUDA toolkit, or run on the CPU"};
    case stub_library:
      return {ExitCode::unavailable, "the CUDA driver library loaded is the toolkit's stub, not a real driver",
              "remove the toolkit's stubs directory from LD_LIBRARY_PATH so the driver's libcuda.so.1 is found"};
    case system_driver_mismatch:
      return {ExitCode::unavailable,
              "the kernel-mode NVIDIA driver and its user-mode library libcuda differ in version",
              "reinstall the driver (or reboot after an update) so both halves match (nvidia-smi reports a mismatch "
              "too)"};
    case compat_not_supported_on_device:
      return {ExitCode::unavailable, "the CUDA forward-compatibility package does not support this GPU",
              "use a driver that natively supports scout's CUDA version"};
    case initialization_error:
      return {ExitCode::unavailable, "the CUDA driver could not initialize",
              check_gpu + " and the driver's log (dmesg)"};
    case devices_unavailable:
      return {ExitCode::unavailable, "every GPU is busy or set to exclusive use by another process",
              "wait for the other process, or change the compute mode (nvidia-smi -c DEFAULT)"};
    case system_not_ready:
      return {ExitCode::unavailable,
              "the GPU system is not ready (e.g. fabric manager not running on NVSwitch systems)",
              "start nvidia-fabricmanager, or " + check_gpu};
    case not_permitted:
    case not_supported:
      return {ExitCode::unavailable, "this GPU or its environment does not permit the operation", check_gpu};
    case device_uninitialized:
      return {ExitCode::unavailable, "the CUDA context is not initialized (device reset or lost)", check_gpu};
    case no_kernel_image_for_device:
    case invalid_ptx:
    case unsupported_ptx_version:
      return {ExitCode::unavailable,
              "scout's GPU kernels were not compiled for this GPU's architecture (or the driver cannot JIT them)",
              "rebuild scout with the GPU's architecture, e.g. -DCMAKE_CUDA_ARCHITECTURES=90 for an H100/H200, or "
              "update the driver"};
    case ecc_uncorrectable:
      return {ExitCode::unavailable, "the GPU reported an uncorrectable ECC memory error",
              "drain this GPU and have it checked (nvidia-smi -q -d ECC)"};
    case launch_timeout:
      return {ExitCode::unavailable, "a GPU kernel ran past the display watchdog's limit",
              "run on a GPU that drives no display"};
    case launch_out_of_resources:
    case illegal_address:
    case launch_failure:
      return {ExitCode::internal, "a scout GPU kernel failed on the device",
              "report this with the GPU model, driver and the command, and run on the CPU meanwhile"};
    case unknown:
      return {ExitCode::unavailable, "the CUDA runtime reports an unknown error", check_gpu + " and dmesg"};
    default:
      return {ExitCode::unavailable, {}, {}};
  }
}

Error cuda_error(int code, const std::string& what, const std::string& message, const std::string& fallback_hint,
                 int runtime_version) {
  CudaErrorAdvice a = cuda_error_advice(code);
  if (code == cuda_code::insufficient_driver)
    a.why = fmt::format("no CUDA driver was found, or the installed driver is older than {}",
                        runtime_name(runtime_version));
  std::string why = message.empty() ? fmt::format("CUDA error {}", code) : message;
  if (!a.why.empty()) why += ": " + a.why;
  std::string hint = a.hint.empty() ? fallback_hint : a.hint;
  return Error{a.code, what, std::move(why), std::move(hint)};
}

}  // namespace scout
