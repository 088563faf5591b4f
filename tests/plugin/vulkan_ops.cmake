# The Vulkan plugin's own suites, on lavapipe or a real GPU (included from
# tests/plugin/CMakeLists.txt; built where the plugin is):
#   llmcpu_vulkan_block_ops_tests  the block ops (plugins/vulkan/block_ops.h) recorded directly,
#                                  compiled against the plugin's sources (llmcpu_vulkan_impl),
#                                  against the scalar references;
#   llmcpu_vulkan_layers_tests     the plugin at layer level through the engine's wrapper
#                                  (core/plugin/offload.h): the pipeline's order and waits, the
#                                  device's AdamW against the CPU's, state round trips, the plan.
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
endif()
