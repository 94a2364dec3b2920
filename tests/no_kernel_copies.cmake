# SPDX-License-Identifier: Apache-2.0
# cmake -DNM=<nm> -DOBJECTS=<a;b;…> -P tests/no_kernel_copies.cmake: fails if an object file of a
# TU that declares the CPU attention kernels extern (inferkit/attention/cpu/kernel_instances.hpp)
# defines one anyway. Such a TU builds, links and passes every test; only its compile time, the
# kernels again, shows it. The instantiating TUs (instantiate_*.cpp, attention_kernels.cpp) are
# skipped: defining them is their job.
set(checked 0)
foreach(object ${OBJECTS})
  if(object MATCHES "(instantiate_[^/]*|attention_kernels)\\.cpp\\.o$")
    continue()
  endif()
  execute_process(COMMAND ${NM} --defined-only ${object} OUTPUT_VARIABLE symbols
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${object}")
  endif()
  # The mangled name of detail::dispatch_paged_attention<Path, KV>.
  if(symbols MATCHES "24dispatch_paged_attention")
    message(FATAL_ERROR "${object} compiles its own CPU attention kernels although it declares "
      "them extern (kernel_instances.hpp)")
  endif()
  math(EXPR checked "${checked} + 1")
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no object file checked: OBJECTS is empty")
endif()
message(STATUS "${checked} object files, none defines a CPU attention kernel")
