# Llama-family models against an independent PyTorch model (tests/fixtures/make_llama_fixture.py,
# float64, written from transformers' modeling semantics), made at test time: for each shape,
# `llmcpu verify` of the Hugging Face folder against its reference (logits <= 1e-5, every gradient
# <= 1e-4 relative, fp32) and 10 AdamW steps of `llmcpu train --model FOLDER` within 2e-4 of
# PyTorch's losses; the same in bf16 within its derived limits. Included by tests/CMakeLists.txt where PyTorch is installed; ${fresh} is its
# scratch folder.
set(llama_script ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/make_llama_fixture.py)
set(llama_cases mha gqa3 mqa qwen2 head24 bf16 shards long phi3 phi3tie swa qwen3 gemma gemma2
    gemma2bf16 gemma3 gemma3shards packed packedswa)
# NAME: the fixture script's arguments, B, T, and how much of it runs (all: verify, verify in bf16
# and train; verify: only the fp32 verify).
set(llama_mha    "--layers 2 --hidden 48 --heads 4 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie")
set(llama_gqa3   "--layers 2 --hidden 48 --heads 6 --kv-heads 2 --intermediate 96 --vocab 333 --max-seq-len 64 --no-tie --rms-eps 1e-5")
set(llama_mqa    "--layers 2 --hidden 48 --heads 4 --kv-heads 1 --intermediate 64 --vocab 333 --max-seq-len 64 --tie")
set(llama_qwen2  "--model-type qwen2 --layers 2 --hidden 48 --heads 6 --kv-heads 2 --intermediate 80 --vocab 333 --max-seq-len 64 --tie --rope-theta 1000000")
set(llama_head24 "--layers 2 --hidden 48 --heads 4 --kv-heads 2 --head-dim 24 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --attention-bias --mlp-bias")
set(llama_bf16   "--model-type mistral --layers 2 --hidden 48 --heads 6 --kv-heads 3 --intermediate 80 --vocab 333 --max-seq-len 64 --tie --dtype bf16")
set(llama_shards "--layers 3 --hidden 48 --heads 6 --kv-heads 2 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --shards 2 --dtype f16")
# Phi-3 (fused qkv_proj and gate_up_proj tensors) with a sliding window shorter than T, tied and
# untied; Mistral with a real sliding window (T = 17 > 5).
set(llama_phi3    "--model-type phi3 --layers 2 --hidden 48 --heads 4 --kv-heads 2 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --sliding-window 5")
set(llama_phi3tie "--model-type phi3 --layers 2 --hidden 48 --heads 6 --intermediate 80 --vocab 333 --max-seq-len 64 --tie")
set(llama_swa     "--model-type mistral --layers 2 --hidden 48 --heads 6 --kv-heads 2 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --sliding-window 5")
# Qwen3 (per-head q/k norms, head_dim 16 != C/NH); Gemma ((1 + w) norms, the embedding times
# sqrt(C), GeGLU, MQA, tied, and a pad token in the batch whose row takes no lookup gradient).
set(llama_qwen3   "--model-type qwen3 --layers 2 --hidden 48 --heads 4 --kv-heads 2 --head-dim 16 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --rope-theta 1000000")
set(llama_gemma   "--model-type gemma --layers 2 --hidden 48 --heads 4 --kv-heads 1 --head-dim 16 --intermediate 80 --vocab 333 --max-seq-len 64 --pad-token-id 68")
# Gemma 2: four norms per layer, soft-caps that bite (a fifth to a quarter of the attention scores
# beyond 1, 14% of the logits beyond 1.5: tests/fixtures/families.py), sliding layers (W = 5 < T)
# alternating with full ones, query_pre_attn_scalar; in bf16 storage, untied, with GQA and W = 4.
# Gemma 3: per-head (1 + w) q/k norms, sliding and full layers with two rope bases (the full
# layers' scaled linearly), a final soft-cap; sharded, untied, MQA, pattern 2.
set(llama_gemma2  "--model-type gemma2 --layers 2 --hidden 48 --heads 4 --kv-heads 2 --head-dim 16 --intermediate 80 --vocab 333 --max-seq-len 64 --sliding-window 5 --attn-softcap 1 --final-softcap 1.5 --query-pre-attn-scalar 24")
set(llama_gemma2bf16 "--model-type gemma2 --layers 3 --hidden 48 --heads 6 --kv-heads 2 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --sliding-window 4 --attn-softcap 0.8 --final-softcap 2 --dtype bf16")
set(llama_gemma3  "--model-type gemma3_text --layers 3 --hidden 48 --heads 4 --kv-heads 2 --head-dim 16 --intermediate 80 --vocab 333 --max-seq-len 64 --sliding-window 5 --layer-types sliding,full,sliding --rope-scaling linear:4 --final-softcap 1.5 --query-pre-attn-scalar 32")
set(llama_gemma3shards "--model-type gemma3_text --layers 4 --hidden 48 --heads 4 --kv-heads 1 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --sliding-window 3 --sliding-window-pattern 2 --shards 3")
# Packed rows (the reference's rows cut into examples, each attending to itself at positions from
# 0, verify passing their starts): examples of 1 to 17 tokens, with llama3 rope scaling; and with
# Mistral's window shorter than most of them. The training steps run on unpacked rows.
set(llama_packed    "--layers 2 --hidden 48 --heads 6 --kv-heads 2 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --rope-scaling llama3:4,1,4,16 --example-lengths 6,1,8,2/17")
set(llama_packedswa "--model-type mistral --layers 2 --hidden 48 --heads 6 --kv-heads 2 --intermediate 80 --vocab 333 --max-seq-len 64 --no-tie --sliding-window 5 --example-lengths 1,9,7/3,1,13")
set(llama_long   "--layers 2 --hidden 48 --heads 6 --kv-heads 2 --intermediate 80 --vocab 400 --max-seq-len 1024 --tie --rope-theta 500000 --rope-scaling llama3:8,1,4,256")
foreach(case ${llama_cases})
  set(B 2)
  set(T 17)
  if(case STREQUAL long)
    set(B 1)
    set(T 1024)
  endif()
  separate_arguments(args UNIX_COMMAND "${llama_${case}}")
  add_test(NAME llama_fixture_make_${case}
           COMMAND ${LLMCPU_DEBIAN_PYTHON} ${llama_script} --out-dir ${fresh} --name llama_${case}
                   ${args} --batch ${B} --seq-len ${T} --seed 41)
  set_tests_properties(llama_fixture_make_${case} PROPERTIES FIXTURES_SETUP llama_fixture_${case})
  set(hf ${fresh}/llama_${case}_hf)
  add_test(NAME llama_fixture_verify_${case}
           COMMAND llmcpu verify --model ${hf} --state ${fresh}/llama_${case}_reference.safetensors)
  add_test(NAME llama_fixture_verify_recompute_${case}
           COMMAND llmcpu verify --model ${hf} --state ${fresh}/llama_${case}_reference.safetensors
                   --recompute all-pointwise)
  # Activation checkpointing: every block's forward again inside the backward pass.
  add_test(NAME llama_fixture_verify_layers_${case}
           COMMAND llmcpu verify --model ${hf} --state ${fresh}/llama_${case}_reference.safetensors
                   --recompute layers)
  add_test(NAME llama_fixture_train_${case}
           COMMAND ${CMAKE_COMMAND} -DLLMCPU=$<TARGET_FILE:llmcpu> -DDIR=${fresh}
                   -DNAME=llama_${case} -DMODEL=${hf} -DB=${B} -DT=${T}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_train_losses.cmake)
  # bf16 mixed precision within its limits (core/verify/verify.h's kBf16LlamaTolerances) and, for
  # the losses, 1e-2 (as GPT-2's bf16 fixtures).
  add_test(NAME llama_fixture_verify_bf16_${case}
           COMMAND llmcpu verify --precision bf16 --model ${hf}
                   --state ${fresh}/llama_${case}_reference.safetensors)
  add_test(NAME llama_fixture_train_bf16_${case}
           COMMAND ${CMAKE_COMMAND} -DLLMCPU=$<TARGET_FILE:llmcpu> -DDIR=${fresh}
                   -DNAME=llama_${case} -DMODEL=${hf} -DB=${B} -DT=${T} -DPRECISION=bf16
                   -DTOL_MICRO=10000 -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_train_losses.cmake)
  set(case_tests llama_fixture_verify_${case} llama_fixture_verify_recompute_${case}
      llama_fixture_verify_layers_${case}
      llama_fixture_train_${case} llama_fixture_verify_bf16_${case}
      llama_fixture_train_bf16_${case})
  # Read and written back in its own dtype, the weights are the reference's bytes (the unsharded
  # cases: a written folder holds one file), and config.json is the reference's, as
  # save_pretrained writes it (families.py, make_llama_fixture.py).
  if(NOT "${llama_${case}}" MATCHES "--shards")
    set(dtype fp32)
    if("${llama_${case}}" MATCHES "--dtype bf16")
      set(dtype bf16)
    elseif("${llama_${case}}" MATCHES "--dtype f16")
      set(dtype fp16)
    endif()
    add_test(NAME llama_fixture_round_trip_${case}
             COMMAND sh -c "\"$1\" convert \"$2\" \"$3\" --dtype $4 && cmp \"$2/model.safetensors\" \"$3/model.safetensors\" && cmp \"$2/config.json\" \"$3/config.json\""
                     round_trip $<TARGET_FILE:llmcpu> ${hf} ${fresh}/llama_${case}_round_trip ${dtype})
    list(APPEND case_tests llama_fixture_round_trip_${case})
  endif()
  set_tests_properties(llama_fixture_verify_${case} llama_fixture_verify_recompute_${case}
                       llama_fixture_verify_layers_${case} llama_fixture_verify_bf16_${case}
                       PROPERTIES PASS_REGULAR_EXPRESSION "verify: OK")
  set_tests_properties(${case_tests} PROPERTIES FIXTURES_REQUIRED llama_fixture_${case})
endforeach()
# The reference itself against facts outside its own code (a numpy model written differently,
# central differences, rope_reference.py, an independent safetensors reader): about 45 s.
add_test(NAME llama_reference_self_check
         COMMAND ${LLMCPU_DEBIAN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/check_llama_reference.py)
# The families' reference (tests/fixtures/families.py) against a numpy model written differently,
# central differences and published config files: about a minute.
add_test(NAME llama_family_reference_self_check
         COMMAND ${LLMCPU_DEBIAN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/check_family_reference.py)
# LoRA's reference (tests/fixtures/lora_reference.py, PEFT 0.17.1's semantics and files) against
# central differences of a numpy model on the merged weights, the base model (B = 0), rsLoRA's
# scaling and PEFT's names, shapes and adapter_config.json keys: about 10 s. The adapter training
# it will check is in progress.
add_test(NAME lora_reference_self_check
         COMMAND ${LLMCPU_DEBIAN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/check_lora_reference.py)
# The README's Hugging Face commands as written (the fetches replaced by folders in SmolLM2's and
# Gemma 3 270M's layouts made here), with a few steps each: tests/cli/check_readme_llama.py.
add_test(NAME llama_readme_commands
         COMMAND ${LLMCPU_DEBIAN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_readme_llama.py
                 $<TARGET_FILE:llmcpu> ${PROJECT_SOURCE_DIR} ${fresh}/readme_llama)
# `llmcpu chat` on a folder in SmolLM2's layout with SmolLM2-Instruct's published template: the
# rendered prompts against @huggingface/jinja and tokenizers.js, two turns of greedy replies (the
# cache kept) against a PyTorch argmax loop, generation_config.json's eos_token_id
# (tests/cli/check_chat_reference.py): about 30 s.
add_test(NAME chat_reference
         COMMAND ${LLMCPU_DEBIAN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_chat_reference.py
                 $<TARGET_FILE:llmcpu> ${PROJECT_SOURCE_DIR} ${fresh}/chat_reference)
set_tests_properties(chat_reference PROPERTIES PASS_REGULAR_EXPRESSION "check_chat_reference.py: OK")
