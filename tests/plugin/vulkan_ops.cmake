# The Vulkan plugin's ops against the scalar reference on lavapipe or a real GPU:
# llmcpu_vulkan_ops_tests (included from tests/plugin/CMakeLists.txt; built where the plugin is).
if(TARGET llmcpu_vulkan)
  add_executable(llmcpu_vulkan_ops_tests ${CMAKE_CURRENT_LIST_DIR}/vulkan_ops_test.cpp)
  target_link_libraries(llmcpu_vulkan_ops_tests PRIVATE llmcpu_simd llmcpu_warnings GTest::gtest
                        GTest::gtest_main ${CMAKE_DL_LIBS})
  target_compile_definitions(llmcpu_vulkan_ops_tests PRIVATE
    LLMCPU_VULKAN_PLUGIN="$<TARGET_FILE:llmcpu_vulkan>")
  add_dependencies(llmcpu_vulkan_ops_tests llmcpu_vulkan)
  gtest_discover_tests(llmcpu_vulkan_ops_tests TEST_PREFIX "Vulkan." DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 300 ENVIRONMENT "${LLMCPU_VULKAN_TEST_ENV}")
endif()
