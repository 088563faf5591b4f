# The Vulkan plugin's own suites, on lavapipe or a real GPU (included from
# tests/plugin/CMakeLists.txt; built where the plugin is):
#   llmcpu_vulkan_block_ops_tests  the block ops (plugins/vulkan/block_ops.h) recorded directly,
#                                  compiled against the plugin's sources (llmcpu_vulkan_impl),
#                                  against the scalar references;
#   llmcpu_vulkan_layers_tests     the plugin at layer level through the engine's wrapper
#                                  (core/plugin/offload.h): the pipeline's order and waits, the
#                                  device's AdamW against the CPU's, state round trips, the plan;
#   Vulkan.probe                   llmcpu_vulkan_probe's `devices` and `gemm --quick`: one JSON
#                                  object each, finite numbers, the chosen device in the list, the
#                                  GEMM shader's check passed (check_vulkan_probe.py, Debian's
#                                  python3; about 5 s on lavapipe).
if(TARGET llmcpu_vulkan_impl)
  add_executable(llmcpu_vulkan_block_ops_tests ${CMAKE_CURRENT_LIST_DIR}/vulkan_block_ops_test.cpp)
  target_link_libraries(llmcpu_vulkan_block_ops_tests PRIVATE llmcpu_vulkan_impl llmcpu_simd
                        llmcpu_warnings GTest::gtest GTest::gtest_main)
  # Vulkan structs are set up as `VkXxxInfo x{VK_STRUCTURE_TYPE_XXX};`, the rest zero by design.
  target_compile_options(llmcpu_vulkan_block_ops_tests PRIVATE -Wno-missing-field-initializers)
  gtest_discover_tests(llmcpu_vulkan_block_ops_tests TEST_PREFIX "Vulkan." DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 300 ENVIRONMENT "${LLMCPU_VULKAN_TEST_ENV}")

  add_executable(llmcpu_vulkan_layers_tests ${CMAKE_CURRENT_LIST_DIR}/vulkan_layers_test.cpp)
  target_link_libraries(llmcpu_vulkan_layers_tests PRIVATE llmcpu_core llmcpu_vulkan_impl
                        llmcpu_warnings GTest::gtest GTest::gtest_main)
  target_compile_definitions(llmcpu_vulkan_layers_tests PRIVATE
    LLMCPU_VULKAN_PLUGIN="$<TARGET_FILE:llmcpu_vulkan>")
  add_dependencies(llmcpu_vulkan_layers_tests llmcpu_vulkan)
  gtest_discover_tests(llmcpu_vulkan_layers_tests TEST_PREFIX "Vulkan." DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 300 ENVIRONMENT "${LLMCPU_VULKAN_TEST_ENV}")

  if(LLMCPU_DEBIAN_PYTHON)
    add_test(NAME Vulkan.probe
             COMMAND ${LLMCPU_DEBIAN_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_vulkan_probe.py
                     $<TARGET_FILE:llmcpu_vulkan_probe>)
    # 77: no Vulkan device at all (skipped, as the suites above skip there).
    set_tests_properties(Vulkan.probe PROPERTIES LABELS vulkan TIMEOUT 120 SKIP_RETURN_CODE 77
                         ENVIRONMENT "${LLMCPU_VULKAN_TEST_ENV}")
  else()
    llmcpu_suite_not_built(vulkan_probe "python3 not found in /usr/bin (apt-get install python3)")
  endif()
endif()
