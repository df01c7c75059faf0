# Helpers of the top-level CMakeLists.txt for the library's layers: per-file ISA flags, and the
# build step that enforces the direction of #includes (cmake/check_layers.cmake).

# ISA variants are chosen by file name: foo_avx512.cpp, foo_avx2.cpp, foo_avxvnni.cpp.
function(genperf_isa_flags)
  foreach(src ${ARGN})
    if(src MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mavx2;-mfma;-mf16c")
    elseif(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    elseif(src MATCHES "_avxvnni\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavxvnni")
    endif()
  endforeach()
endfunction()

# The public headers (include/genperf/) of each layer. A new public header must be placed here,
# or the layer check fails and names it.
set(GENPERF_PUBLIC_core dtype.h error.h fft.h fileio.h progress.h rng.h runtime.h tensor.h)
set(GENPERF_PUBLIC_comm comm.h)
set(GENPERF_PUBLIC_ops ops.h ops_cost.h ops_image.h ops_train.h)
set(GENPERF_PUBLIC_io fits.h json.h png.h tokenizer.h)
set(GENPERF_PUBLIC_models checkpoint.h diffusion.h llama.h llama_config.h model_family.h sr.h sr_model.h unet.h)
set(GENPERF_PUBLIC_quant quantize.h sensitivity.h)
set(GENPERF_PUBLIC_train dist.h sr_train.h train.h train_data.h trainer.h)
set(GENPERF_PUBLIC_eval eval.h sr_eval.h sr_metrics.h)
set(GENPERF_PUBLIC_bench bench.h bench_sr.h bench_train.h op_harness.h plan.h)
set(GENPERF_PUBLIC_study decode_latency.h hw_model.h study_store.h study.h)
set(GENPERF_PUBLIC_report report.h study_report.h)

# The table the check reads, written at configure time.
set(table "${PROJECT_BINARY_DIR}/generated/layers_table.cmake")
set(text "set(GENPERF_LAYERS \"${GENPERF_LAYERS}\")\n")
foreach(layer ${GENPERF_LAYERS})
  foreach(kind DIRS DEPS)
    string(APPEND text "set(GENPERF_LAYER_${kind}_${layer} \"${GENPERF_LAYER_${kind}_${layer}}\")\n")
  endforeach()
  string(APPEND text "set(GENPERF_PUBLIC_${layer} \"${GENPERF_PUBLIC_${layer}}\")\n")
endforeach()
file(WRITE "${table}" "${text}")

file(GLOB_RECURSE layer_files CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/src/*.cpp ${PROJECT_SOURCE_DIR}/src/*.h ${PROJECT_SOURCE_DIR}/src/*.inc
  ${PROJECT_SOURCE_DIR}/src/*.cu ${PROJECT_SOURCE_DIR}/src/*.cuh ${PROJECT_SOURCE_DIR}/include/genperf/*.h)
set(stamp "${PROJECT_BINARY_DIR}/generated/layers.ok")
add_custom_command(OUTPUT "${stamp}"
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DTABLE=${table}
          -P ${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake
  COMMAND ${CMAKE_COMMAND} -E touch "${stamp}"
  DEPENDS ${layer_files} "${table}" ${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake
  COMMENT "Checking that #includes follow the layers" VERBATIM)
add_custom_target(genperf_check_layers DEPENDS "${stamp}")
