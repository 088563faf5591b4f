# `llmcpu convert --adapter` (core/lora/merge.h) against PEFT's merge_and_unload as
# tests/fixtures/make_lora_fixture.py computes it (float64, rounded to the base's dtype): for each
# case of lora_fixtures.cmake that has a trained adapter (B not zero), tests/cli/check_lora_merge.py
# converts NAME_hf with --adapter NAME_adapter and compares every tensor with NAME_merged/'s, bit
# for bit (the script's docstring says why that is the expectation); GPT-2 both ways, Hugging
# Face -> llm.c and llm.c -> Hugging Face. One case of its own, rsLoRA at r 3 and alpha 7: a
# scaling (7 / sqrt(3)) that a float does not hold, which the fixtures of lora_fixtures.cmake
# (scalings 1.5, 2 and 4) cannot tell from its float rounding. Included by tests/CMakeLists.txt
# after lora_fixtures.cmake, whose fixtures lora_fixture_<case> (files ${fresh}/lora_<case>_*) it
# reuses.
set(lora_merge_script ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/make_lora_fixture.py)
set(lora_merge_check ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_lora_merge.py)
set(lora_merge_cases gqa gpt2 phi3 gemma2 qwen3 gemma3 bf16base mts qwen3mts)
foreach(case ${lora_merge_cases})
  add_test(NAME lora_merge_${case}
           COMMAND ${LLMCPU_DEBIAN_PYTHON} ${lora_merge_check} $<TARGET_FILE:llmcpu> ${fresh}
                   lora_${case})
  set_tests_properties(lora_merge_${case} PROPERTIES FIXTURES_REQUIRED lora_fixture_${case}
                       PASS_REGULAR_EXPRESSION "check_lora_merge.py: OK")
endforeach()
add_test(NAME lora_merge_fixture_make_rslora
         COMMAND ${LLMCPU_DEBIAN_PYTHON} ${lora_merge_script} --out-dir ${fresh}
                 --name lora_merge_rslora --model-type llama --layers 2 --hidden 48 --heads 6
                 --kv-heads 2 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --batch 2
                 --seq-len 17 --r 3 --lora-alpha 7 --use-rslora --steps 1 --seed 41)
set_tests_properties(lora_merge_fixture_make_rslora PROPERTIES
                     FIXTURES_SETUP lora_merge_fixture_rslora)
add_test(NAME lora_merge_rslora
         COMMAND ${LLMCPU_DEBIAN_PYTHON} ${lora_merge_check} $<TARGET_FILE:llmcpu> ${fresh}
                 lora_merge_rslora)
set_tests_properties(lora_merge_rslora PROPERTIES FIXTURES_REQUIRED lora_merge_fixture_rslora
                     PASS_REGULAR_EXPRESSION "check_lora_merge.py: OK")
