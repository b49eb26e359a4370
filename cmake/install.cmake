# Installing kascade as a CMake package: `cmake --install BUILD --prefix PREFIX` puts the static
# libraries, the public headers (include/kascade), the `kascade` CLI, the C library libkascade_c with its
# Python binding (share/kascade/python) and lib/cmake/kascade/kascadeConfig.cmake there, so another
# project builds against it with
#   find_package(kascade 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE kascade::kascade)
# (the package finds the same dependencies again: Threads, OpenMP, nlohmann_json, BLAS, PCRE2 through
# pkg-config, and CUDAToolkit when the build had the CUDA backend). examples/ is such a project;
# tests/scripts/test_install.sh installs into a temporary prefix and builds and runs it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(kascade_exported_targets kascade kascade_core kascade_ref kascade_policy kascade_calibrate kascade_tokenizer
    kascade_model kascade_runtime kascade_eval kascade_c)
if(TARGET kascade_cuda)
  list(APPEND kascade_exported_targets kascade_cuda)
endif()
install(TARGETS ${kascade_exported_targets} EXPORT kascadeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kascade DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET kascade_cli)
  install(TARGETS kascade_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# The installed shared objects keep the link-time directories of their non-system libraries (cuBLAS in a
# CUDA build) in their RPATH, so they load wherever the build found them.
foreach(target kascade_c kascade_cli)
  if(TARGET ${target})
    set_target_properties(${target} PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  endif()
endforeach()
# The Python binding of the C interface (libkascade_c, exported above; python/kascade finds it at
# <prefix>/lib from <prefix>/share/kascade/python/kascade).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/kascade DESTINATION ${CMAKE_INSTALL_DATADIR}/kascade/python
        PATTERN __pycache__ EXCLUDE)

set(kascade_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kascade)
install(EXPORT kascadeTargets NAMESPACE kascade:: DESTINATION ${kascade_config_dir})
set(KASCADE_PACKAGE_HAS_CUDA ${KASCADE_WITH_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kascadeConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kascadeConfig.cmake INSTALL_DESTINATION ${kascade_config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kascadeConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kascadeConfig.cmake ${PROJECT_BINARY_DIR}/kascadeConfigVersion.cmake
        DESTINATION ${kascade_config_dir})
