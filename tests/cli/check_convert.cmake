# `llmcpu convert` through the command line. Called by ctest: cmake -DLLMCPU=... -DMODE=... -P this file.
#   MODE=verify: -DIN=<HF folder or .safetensors> -DOUT=<.bin> -DSTATE=<debug state> [-DDTYPE=fp32|bf16]:
#     converts IN to an llm.c checkpoint and checks it with `llmcpu verify` against PyTorch's state.
#   MODE=round_trip: -DMODEL=<llm.c .bin, version 3> -DDIR=<scratch folder>: llm.c -> safetensors ->
#     llm.c gives MODEL back byte for byte (fp32); and in bf16, safetensors -> llm.c version 5 ->
#     safetensors gives the same safetensors file and config.json.
if(NOT DEFINED DTYPE)
  set(DTYPE fp32)
endif()

function(run)
  execute_process(COMMAND ${LLMCPU} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(JOIN ARGN " " words)
  message("llmcpu ${words}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llmcpu ${words} exited with ${rc}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

function(same a b)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${a} ${b} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${a} and ${b} differ")
  endif()
endfunction()

if(MODE STREQUAL "verify")
  file(REMOVE ${OUT})
  run(convert ${IN} ${OUT} --dtype ${DTYPE})
  run(verify --model ${OUT} --state ${STATE})
  if(NOT output MATCHES "verify: OK")
    message(FATAL_ERROR "verify did not say OK")
  endif()
elseif(MODE STREQUAL "round_trip")
  file(REMOVE_RECURSE ${DIR})
  file(MAKE_DIRECTORY ${DIR})
  run(convert ${MODEL} ${DIR}/fp32)
  run(convert ${DIR}/fp32 ${DIR}/fp32.bin)
  same(${MODEL} ${DIR}/fp32.bin)
  # The same through a .safetensors name (config.json beside it).
  file(MAKE_DIRECTORY ${DIR}/named)
  run(convert ${MODEL} ${DIR}/named/model_fp32.safetensors)
  run(convert ${DIR}/named/model_fp32.safetensors ${DIR}/named.bin)
  same(${MODEL} ${DIR}/named.bin)
  run(convert ${MODEL} ${DIR}/bf16 --dtype bf16)
  run(convert ${DIR}/bf16 ${DIR}/bf16.bin --dtype bf16)
  run(convert ${DIR}/bf16.bin ${DIR}/bf16_again --dtype bf16)
  same(${DIR}/bf16/model.safetensors ${DIR}/bf16_again/model.safetensors)
  same(${DIR}/bf16/config.json ${DIR}/bf16_again/config.json)
else()
  message(FATAL_ERROR "MODE must be verify or round_trip")
endif()
