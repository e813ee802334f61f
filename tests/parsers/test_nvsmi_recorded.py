"""Output recorded from a real nvidia-smi (driver 580.159.04, CUDA 13.0, one NVIDIA H200) while a
PyTorch process held memory on it, run through each parser. Recorded 2026-11-30 on the project's
GPU machine; the board serial number is blanked. Trailing spaces are nvidia-smi's own."""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from conftest import parse_file

from forensics.options import Options

MiB = 1 << 20
UUID = "GPU-de25bed1-7435-016b-2e4f-41acf9daf109"
BUS = "00000000:00:06.0"

CSV_TXT = r'''timestamp, index, name, uuid, pci.bus_id, driver_version, memory.total [MiB], memory.reserved [MiB], memory.used [MiB], memory.free [MiB]
2026/11/30 04:57:38.163, 0, NVIDIA H200, GPU-de25bed1-7435-016b-2e4f-41acf9daf109, 00000000:00:06.0, 580.159.04, 143771 MiB, 616 MiB, 0 MiB, 143156 MiB
'''

CSV_LOOP_TXT = r'''2026/11/30 04:57:38.186, 0, 0, 143771
2026/11/30 04:57:38.487, 0, 0, 143771
2026/11/30 04:57:38.787, 0, 0, 143771
2026/11/30 04:57:39.087, 0, 0, 143771
2026/11/30 04:57:39.387, 0, 1, 143771
2026/11/30 04:57:39.687, 0, 113, 143771
2026/11/30 04:57:39.988, 0, 1643, 143771
'''

APPS_TXT = r'''timestamp, gpu_uuid, gpu_bus_id, pid, process_name, used_gpu_memory [MiB]
2026/11/30 04:57:46.445, GPU-de25bed1-7435-016b-2e4f-41acf9daf109, 00000000:00:06.0, 414, python3, 1634 MiB
'''

APPS_NOHEADER_TXT = r'''414, python3, 1634 MiB
'''

APPS_AFTER_TXT = r'''timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]
'''

DMON_TXT = r'''#Date        Time         gpu     sm    mem    enc    dec    jpg    ofa     fb   bar1   ccpm 
#YYYYMMDD    HH:MM:SS     Idx      %      %      %      %      %      %     MB     MB     MB 
 20261130    04:57:40       0      0      0      0      0      0      0   1643   1644      0 
 20261130    04:57:41       0      0      0      0      0      0      0   1643   1644      0 
 20261130    04:57:42       0      0      0      0      0      0      0   1643   1644      0 
'''

PMON_TXT = r'''#Date        Time         gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   ccpm    command 
#YYYYMMDD    HH:MM:SS     Idx           #    C/G      %      %      %      %      %      %     MB     MB    name 
 20261130    04:58:09       0        511     C      0      0      -      -      -      -   2146      0    python3        
 20261130    04:58:10       0        511     C      0      0      -      -      -      -   2146      0    python3        
 20261130    04:58:11       0        511     C      0      0      -      -      -      -   2146      0    python3        
'''

TABLE_TXT = r'''Mon Nov 30 04:58:08 2026       
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:00:06.0 Off |                    0 |
| N/A   43C    P0            126W /  700W |    2155MiB / 143771MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A             511      C   python3                                2146MiB |
+-----------------------------------------------------------------------------------------+
'''

QMEM_TXT = r'''
==============NVSMI LOG==============

Timestamp                                              : Mon Nov 30 04:58:09 2026
Driver Version                                         : 580.159.04
CUDA Version                                           : 13.0

Attached GPUs                                          : 1
GPU 00000000:00:06.0
    FB Memory Usage
        Total                                          : 143771 MiB
        Reserved                                       : 616 MiB
        Used                                           : 2155 MiB
        Free                                           : 141002 MiB
    BAR1 Memory Usage
        Total                                          : 262144 MiB
        Used                                           : 2156 MiB
        Free                                           : 259988 MiB
    Conf Compute Protected Memory Usage
        Total                                          : 0 MiB
        Used                                           : 0 MiB
        Free                                           : 0 MiB

'''

Q_TXT = r'''
==============NVSMI LOG==============

Timestamp                                              : Mon Nov 30 04:58:08 2026
Driver Version                                         : 580.159.04
CUDA Version                                           : 13.0

Attached GPUs                                          : 1
GPU 00000000:00:06.0
    Product Name                                       : NVIDIA H200
    Product Brand                                      : NVIDIA
    Product Architecture                               : Hopper
    Display Mode                                       : Requested functionality has been deprecated
    Display Attached                                   : Yes
    Display Active                                     : Disabled
    Persistence Mode                                   : Enabled
    Addressing Mode                                    : None
    MIG Mode
        Current                                        : Disabled
        Pending                                        : Disabled
    Accounting Mode                                    : Disabled
    Accounting Mode Buffer Size                        : 4000
    Driver Model
        Current                                        : N/A
        Pending                                        : N/A
    Serial Number                                      : 0000000000000
    GPU UUID                                           : GPU-de25bed1-7435-016b-2e4f-41acf9daf109
    GPU PDI                                            : 0x87509a70d63229e9
    Minor Number                                       : 0
    VBIOS Version                                      : 96.00.A5.00.1A
    MultiGPU Board                                     : No
    Board ID                                           : 0x6
    Board Part Number                                  : 692-2G520-0282-000
    GPU Part Number                                    : 2335-895-A1
    FRU Part Number                                    : N/A
    Platform Info
        Chassis Serial Number                          : N/A
        Slot Number                                    : N/A
        Tray Index                                     : N/A
        Host ID                                        : N/A
        Peer Type                                      : N/A
        Module Id                                      : 3
        GPU Fabric GUID                                : N/A
    Inforom Version
        Image Version                                  : G520.0282.02.02
        OEM Object                                     : 2.1
        ECC Object                                     : 7.16
        Power Management Object                        : N/A
    Inforom BBX Object Flush
        Latest Timestamp                               : N/A
        Latest Duration                                : N/A
    GPU Operation Mode
        Current                                        : N/A
        Pending                                        : N/A
    GPU C2C Mode                                       : Disabled
    GPU Virtualization Mode
        Virtualization Mode                            : Pass-Through
        Host VGPU Mode                                 : N/A
        vGPU Heterogeneous Mode                        : N/A
    GPU Recovery Action                                : None
    GSP Firmware Version                               : 580.159.04
    IBMNPU
        Relaxed Ordering Mode                          : N/A
    PCI
        Bus                                            : 0x00
        Device                                         : 0x06
        Domain                                         : 0x0000
        Base Classcode                                 : 0x3
        Sub Classcode                                  : 0x2
        Device Id                                      : 0x233510DE
        Bus Id                                         : 00000000:00:06.0
        Sub System Id                                  : 0x18BF10DE
        GPU Link Info
            PCIe Generation
                Max                                    : 5
                Current                                : 5
                Device Current                         : 5
                Device Max                             : 5
                Host Max                               : N/A
            Link Width
                Max                                    : 16x
                Current                                : 16x
        Bridge Chip
            Type                                       : N/A
            Firmware                                   : N/A
        Replays Since Reset                            : 1
        Replay Number Rollovers                        : 0
        Tx Throughput                                  : 1629 KB/s
        Rx Throughput                                  : 422 KB/s
        Atomic Caps Outbound                           : N/A
        Atomic Caps Inbound                            : N/A
    Fan Speed                                          : N/A
    Performance State                                  : P0
    Clocks Event Reasons
        Idle                                           : Not Active
        Applications Clocks Setting                    : Not Active
        SW Power Cap                                   : Not Active
        HW Slowdown                                    : Not Active
            HW Thermal Slowdown                        : Not Active
            HW Power Brake Slowdown                    : Not Active
        Sync Boost                                     : Not Active
        SW Thermal Slowdown                            : Not Active
        Display Clock Setting                          : Not Active
    Clocks Event Reasons Counters
        SW Power Capping                               : 0 us
        Sync Boost                                     : 0 us
        SW Thermal Slowdown                            : 0 us
        HW Thermal Slowdown                            : 0 us
        HW Power Braking                               : 0 us
    Sparse Operation Mode                              : Disabled
    FB Memory Usage
        Total                                          : 143771 MiB
        Reserved                                       : 616 MiB
        Used                                           : 2155 MiB
        Free                                           : 141002 MiB
    BAR1 Memory Usage
        Total                                          : 262144 MiB
        Used                                           : 2156 MiB
        Free                                           : 259988 MiB
    Conf Compute Protected Memory Usage
        Total                                          : 0 MiB
        Used                                           : 0 MiB
        Free                                           : 0 MiB
    Compute Mode                                       : Default
    Utilization
        GPU                                            : 0 %
        Memory                                         : 0 %
        Encoder                                        : 0 %
        Decoder                                        : 0 %
        JPEG                                           : 0 %
        OFA                                            : 0 %
    Encoder Stats
        Active Sessions                                : 0
        Average FPS                                    : 0
        Average Latency                                : 0
    FBC Stats
        Active Sessions                                : 0
        Average FPS                                    : 0
        Average Latency                                : 0
    DRAM Encryption Mode
        Current                                        : N/A
        Pending                                        : N/A
    ECC Mode
        Current                                        : Enabled
        Pending                                        : Enabled
    ECC Errors
        Volatile
            SRAM Correctable                           : 0
            SRAM Uncorrectable Parity                  : 0
            SRAM Uncorrectable SEC-DED                 : 0
            DRAM Correctable                           : 0
            DRAM Uncorrectable                         : 0
        Aggregate
            SRAM Correctable                           : 0
            SRAM Uncorrectable Parity                  : 0
            SRAM Uncorrectable SEC-DED                 : 0
            DRAM Correctable                           : 0
            DRAM Uncorrectable                         : 0
            SRAM Threshold Exceeded                    : No
        Aggregate Uncorrectable SRAM Sources
            SRAM L2                                    : 0
            SRAM SM                                    : 0
            SRAM Microcontroller                       : 0
            SRAM PCIE                                  : 0
            SRAM Other                                 : 0
        Channel Repair Pending                         : No
        TPC Repair Pending                             : No
        Unrepairable Memory                            : No
    Retired Pages
        Single Bit ECC                                 : N/A
        Double Bit ECC                                 : N/A
        Pending Page Blacklist                         : N/A
    Remapped Rows
        Correctable Error                              : 0
        Inactive Correctable Error                     : 0
        Uncorrectable Error                            : 0
        Inactive Uncorrectable Error                   : 0
        Pending                                        : No
        Remapping Failure Occurred                     : No
        Bank Remap Availability Histogram
            Max                                        : 3072 bank(s)
            High                                       : 0 bank(s)
            Partial                                    : 0 bank(s)
            Low                                        : 0 bank(s)
            None                                       : 0 bank(s)
    Temperature
        GPU Current Temp                               : 43 C
        GPU T.Limit Temp                               : 44 C
        GPU Shutdown T.Limit Temp                      : -8 C
        GPU Slowdown T.Limit Temp                      : -2 C
        GPU Max Operating T.Limit Temp                 : 0 C
        GPU Target Temperature                         : N/A
        Memory Current Temp                            : 43 C
        Memory Max Operating T.Limit Temp              : 0 C
    GPU Power Readings
        Average Power Draw                             : 126.24 W
        Instantaneous Power Draw                       : 126.31 W
        Current Power Limit                            : 700.00 W
        Requested Power Limit                          : 700.00 W
        Default Power Limit                            : 700.00 W
        Min Power Limit                                : 200.00 W
        Max Power Limit                                : 700.00 W
    GPU Memory Power Readings 
        Average Power Draw                             : 44.98 W
        Instantaneous Power Draw                       : N/A
    Module Power Readings
        Average Power Draw                             : N/A
        Instantaneous Power Draw                       : N/A
        Current Power Limit                            : N/A
        Requested Power Limit                          : N/A
        Default Power Limit                            : N/A
        Min Power Limit                                : N/A
        Max Power Limit                                : N/A
    Power Smoothing                                    : N/A
    Workload Power Profiles
        Requested Profiles                             : N/A
        Enforced Profiles                              : N/A
    Clocks
        Graphics                                       : 1980 MHz
        SM                                             : 1980 MHz
        Memory                                         : 3201 MHz
        Video                                          : 1545 MHz
    Applications Clocks
        Graphics                                       : 1980 MHz
        Memory                                         : 3201 MHz
    Default Applications Clocks
        Graphics                                       : 1980 MHz
        Memory                                         : 3201 MHz
    Deferred Clocks
        Memory                                         : N/A
    Max Clocks
        Graphics                                       : 1980 MHz
        SM                                             : 1980 MHz
        Memory                                         : 3201 MHz
        Video                                          : 1545 MHz
    Max Customer Boost Clocks
        Graphics                                       : 1980 MHz
    Clock Policy
        Auto Boost                                     : N/A
        Auto Boost Default                             : N/A
    Fabric
        State                                          : N/A
        Status                                         : N/A
        CliqueId                                       : N/A
        ClusterUUID                                    : N/A
        Health
            Summary                                    : N/A
            Bandwidth                                  : N/A
            Route Recovery in progress                 : N/A
            Route Unhealthy                            : N/A
            Access Timeout Recovery                    : N/A
            Incorrect Configuration                    : N/A
            Partition Assigned                         : N/A
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 511
            Type                          : C
            Name                          : python3
            Used GPU Memory               : 2146 MiB
    Capabilities
        EGM                                            : disabled

'''

QX_XML = r'''<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">
<nvidia_smi_log>
	<timestamp>Mon Nov 30 04:58:09 2026</timestamp>
	<driver_version>580.159.04</driver_version>
	<cuda_version>13.0</cuda_version>
	<attached_gpus>1</attached_gpus>
	<gpu id="00000000:00:06.0">
		<product_name>NVIDIA H200</product_name>
		<product_brand>NVIDIA</product_brand>
		<product_architecture>Hopper</product_architecture>
		<display_mode>Requested functionality has been deprecated</display_mode>
		<display_attached>Yes</display_attached>
		<display_active>Disabled</display_active>
		<persistence_mode>Enabled</persistence_mode>
		<addressing_mode>None</addressing_mode>
		<mig_mode>
			<current_mig>Disabled</current_mig>
			<pending_mig>Disabled</pending_mig>
		</mig_mode>
		<mig_devices>
			None
		</mig_devices>
		<accounting_mode>Disabled</accounting_mode>
		<accounting_mode_buffer_size>4000</accounting_mode_buffer_size>
		<driver_model>
			<current_dm>N/A</current_dm>
			<pending_dm>N/A</pending_dm>
		</driver_model>
		<serial>0000000000000</serial>
		<uuid>GPU-de25bed1-7435-016b-2e4f-41acf9daf109</uuid>
		<pdi>0x87509a70d63229e9</pdi>
		<minor_number>0</minor_number>
		<vbios_version>96.00.A5.00.1A</vbios_version>
		<multigpu_board>No</multigpu_board>
		<board_id>0x6</board_id>
		<board_part_number>692-2G520-0282-000</board_part_number>
		<gpu_part_number>2335-895-A1</gpu_part_number>
		<gpu_fru_part_number>N/A</gpu_fru_part_number>
		<platformInfo>
			<chassis_serial_number>N/A</chassis_serial_number>
			<slot_number>N/A</slot_number>
			<tray_index>N/A</tray_index>
			<host_id>N/A</host_id>
			<peer_type>N/A</peer_type>
			<module_id>3</module_id>
			<gpu_fabric_guid>N/A</gpu_fabric_guid>
		</platformInfo>
		<inforom_version>
			<img_version>G520.0282.02.02</img_version>
			<oem_object>2.1</oem_object>
			<ecc_object>7.16</ecc_object>
			<pwr_object>N/A</pwr_object>
		</inforom_version>
		<inforom_bbx_flush>
			<latest_timestamp>N/A</latest_timestamp>
			<latest_duration>N/A</latest_duration>
		</inforom_bbx_flush>
		<gpu_operation_mode>
			<current_gom>N/A</current_gom>
			<pending_gom>N/A</pending_gom>
		</gpu_operation_mode>
		<c2c_mode>Disabled</c2c_mode>
		<gpu_virtualization_mode>
			<virtualization_mode>Pass-Through</virtualization_mode>
			<host_vgpu_mode>N/A</host_vgpu_mode>
			<vgpu_heterogeneous_mode>N/A</vgpu_heterogeneous_mode>
		</gpu_virtualization_mode>
		<gpu_recovery_action>None</gpu_recovery_action>
		<gsp_firmware_version>580.159.04</gsp_firmware_version>
		<ibmnpu>
			<relaxed_ordering_mode>N/A</relaxed_ordering_mode>
		</ibmnpu>
		<pci>
			<pci_bus>00</pci_bus>
			<pci_device>06</pci_device>
			<pci_domain>0000</pci_domain>
			<pci_base_class>3</pci_base_class>
			<pci_sub_class>2</pci_sub_class>
			<pci_device_id>233510DE</pci_device_id>
			<pci_bus_id>00000000:00:06.0</pci_bus_id>
			<pci_sub_system_id>18BF10DE</pci_sub_system_id>
			<pci_gpu_link_info>
				<pcie_gen>
					<max_link_gen>5</max_link_gen>
					<current_link_gen>5</current_link_gen>
					<device_current_link_gen>5</device_current_link_gen>
					<max_device_link_gen>5</max_device_link_gen>
					<max_host_link_gen>N/A</max_host_link_gen>
				</pcie_gen>
				<link_widths>
					<max_link_width>16x</max_link_width>
					<current_link_width>16x</current_link_width>
				</link_widths>
			</pci_gpu_link_info>
			<pci_bridge_chip>
				<bridge_chip_type>N/A</bridge_chip_type>
				<bridge_chip_fw>N/A</bridge_chip_fw>
			</pci_bridge_chip>
			<replay_counter>1</replay_counter>
			<replay_rollover_counter>0</replay_rollover_counter>
			<tx_util>910 KB/s</tx_util>
			<rx_util>442 KB/s</rx_util>
			<atomic_caps_outbound>N/A</atomic_caps_outbound>
			<atomic_caps_inbound>N/A</atomic_caps_inbound>
		</pci>
		<fan_speed>N/A</fan_speed>
		<performance_state>P0</performance_state>
		<clocks_event_reasons>
			<clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
			<clocks_event_reason_applications_clocks_setting>Not Active</clocks_event_reason_applications_clocks_setting>
			<clocks_event_reason_sw_power_cap>Not Active</clocks_event_reason_sw_power_cap>
			<clocks_event_reason_hw_slowdown>Not Active</clocks_event_reason_hw_slowdown>
			<clocks_event_reason_hw_thermal_slowdown>Not Active</clocks_event_reason_hw_thermal_slowdown>
			<clocks_event_reason_hw_power_brake_slowdown>Not Active</clocks_event_reason_hw_power_brake_slowdown>
			<clocks_event_reason_sync_boost>Not Active</clocks_event_reason_sync_boost>
			<clocks_event_reason_sw_thermal_slowdown>Not Active</clocks_event_reason_sw_thermal_slowdown>
			<clocks_event_reason_display_clocks_setting>Not Active</clocks_event_reason_display_clocks_setting>
		</clocks_event_reasons>
		<clocks_event_reasons_counters>
			<clocks_event_reasons_counters_sw_power_cap>0 us</clocks_event_reasons_counters_sw_power_cap>
			<clocks_event_reasons_counters_sync_boost>0 us</clocks_event_reasons_counters_sync_boost>
			<clocks_event_reasons_counters_sw_therm_slowdown>0 us</clocks_event_reasons_counters_sw_therm_slowdown>
			<clocks_event_reasons_counters_hw_therm_slowdown>0 us</clocks_event_reasons_counters_hw_therm_slowdown>
			<clocks_event_reasons_counters_hw_power_brake>0 us</clocks_event_reasons_counters_hw_power_brake>
		</clocks_event_reasons_counters>
		<sparse_operation_mode>Disabled</sparse_operation_mode>
		<fb_memory_usage>
			<total>143771 MiB</total>
			<reserved>616 MiB</reserved>
			<used>2155 MiB</used>
			<free>141002 MiB</free>
		</fb_memory_usage>
		<bar1_memory_usage>
			<total>262144 MiB</total>
			<used>2156 MiB</used>
			<free>259988 MiB</free>
		</bar1_memory_usage>
		<cc_protected_memory_usage>
			<total>0 MiB</total>
			<used>0 MiB</used>
			<free>0 MiB</free>
		</cc_protected_memory_usage>
		<compute_mode>Default</compute_mode>
		<utilization>
			<gpu_util>0 %</gpu_util>
			<memory_util>0 %</memory_util>
			<encoder_util>0 %</encoder_util>
			<decoder_util>0 %</decoder_util>
			<jpeg_util>0 %</jpeg_util>
			<ofa_util>0 %</ofa_util>
		</utilization>
		<encoder_stats>
			<session_count>0</session_count>
			<average_fps>0</average_fps>
			<average_latency>0</average_latency>
		</encoder_stats>
		<fbc_stats>
			<session_count>0</session_count>
			<average_fps>0</average_fps>
			<average_latency>0</average_latency>
		</fbc_stats>
		<dram_encryption_mode>
			<current_dram_encryption>N/A</current_dram_encryption>
			<pending_dram_encryption>N/A</pending_dram_encryption>
		</dram_encryption_mode>
		<ecc_mode>
			<current_ecc>Enabled</current_ecc>
			<pending_ecc>Enabled</pending_ecc>
		</ecc_mode>
		<ecc_errors>
			<volatile>
				<sram_correctable>0</sram_correctable>
				<sram_uncorrectable_parity>0</sram_uncorrectable_parity>
				<sram_uncorrectable_secded>0</sram_uncorrectable_secded>
				<dram_correctable>0</dram_correctable>
				<dram_uncorrectable>0</dram_uncorrectable>
			</volatile>
			<aggregate>
				<sram_correctable>0</sram_correctable>
				<sram_uncorrectable_parity>0</sram_uncorrectable_parity>
				<sram_uncorrectable_secded>0</sram_uncorrectable_secded>
				<dram_correctable>0</dram_correctable>
				<dram_uncorrectable>0</dram_uncorrectable>
				<sram_threshold_exceeded>No</sram_threshold_exceeded>
			</aggregate>
			<aggregate_uncorrectable_sram_sources>
				<sram_l2>0</sram_l2>
				<sram_sm>0</sram_sm>
				<sram_microcontroller>0</sram_microcontroller>
				<sram_pcie>0</sram_pcie>
				<sram_other>0</sram_other>
			</aggregate_uncorrectable_sram_sources>
			<channel_repair_pending>No</channel_repair_pending>
			<tpc_repair_pending>No</tpc_repair_pending>
			<unrepairable_memory>No</unrepairable_memory>
		</ecc_errors>
		<retired_pages>
			<multiple_single_bit_retirement>
				<retired_count>N/A</retired_count>
				<retired_pagelist>N/A</retired_pagelist>
			</multiple_single_bit_retirement>
			<double_bit_retirement>
				<retired_count>N/A</retired_count>
				<retired_pagelist>N/A</retired_pagelist>
			</double_bit_retirement>
			<pending_blacklist>N/A</pending_blacklist>
			<pending_retirement>N/A</pending_retirement>
		</retired_pages>
		<remapped_rows>
			<remapped_row_corr>0</remapped_row_corr>
			<remapped_row_corr_inactive>0</remapped_row_corr_inactive>
			<remapped_row_unc>0</remapped_row_unc>
			<remapped_row_unc_inactive>0</remapped_row_unc_inactive>
			<remapped_row_pending>No</remapped_row_pending>
			<remapped_row_failure>No</remapped_row_failure>
			<row_remapper_histogram>
				<row_remapper_histogram_max>3072 bank(s)</row_remapper_histogram_max>
				<row_remapper_histogram_high>0 bank(s)</row_remapper_histogram_high>
				<row_remapper_histogram_partial>0 bank(s)</row_remapper_histogram_partial>
				<row_remapper_histogram_low>0 bank(s)</row_remapper_histogram_low>
				<row_remapper_histogram_none>0 bank(s)</row_remapper_histogram_none>
			</row_remapper_histogram>
		</remapped_rows>
		<temperature>
			<gpu_temp>43 C</gpu_temp>
			<gpu_temp_tlimit>44 C</gpu_temp_tlimit>
			<gpu_temp_max_tlimit_threshold>-8 C</gpu_temp_max_tlimit_threshold>
			<gpu_temp_slow_tlimit_threshold>-2 C</gpu_temp_slow_tlimit_threshold>
			<gpu_temp_max_gpu_tlimit_threshold>0 C</gpu_temp_max_gpu_tlimit_threshold>
			<gpu_target_temperature>N/A</gpu_target_temperature>
			<memory_temp>43 C</memory_temp>
			<gpu_temp_max_mem_tlimit_threshold>0 C</gpu_temp_max_mem_tlimit_threshold>
		</temperature>
		<supported_gpu_target_temp>
			<gpu_target_temp_min>N/A</gpu_target_temp_min>
			<gpu_target_temp_max>N/A</gpu_target_temp_max>
		</supported_gpu_target_temp>
		<gpu_power_readings>
			<power_state>P0</power_state>
			<average_power_draw>126.28 W</average_power_draw>
			<instant_power_draw>126.64 W</instant_power_draw>
			<current_power_limit>700.00 W</current_power_limit>
			<requested_power_limit>700.00 W</requested_power_limit>
			<default_power_limit>700.00 W</default_power_limit>
			<min_power_limit>200.00 W</min_power_limit>
			<max_power_limit>700.00 W</max_power_limit>
		</gpu_power_readings>
		<gpu_memory_power_readings>
			<average_power_draw>45.06 W</average_power_draw>
			<instant_power_draw>N/A</instant_power_draw>
		</gpu_memory_power_readings>
		<module_power_readings>
			<power_state>P0</power_state>
			<average_power_draw>N/A</average_power_draw>
			<instant_power_draw>N/A</instant_power_draw>
			<current_power_limit>N/A</current_power_limit>
			<requested_power_limit>N/A</requested_power_limit>
			<default_power_limit>N/A</default_power_limit>
			<min_power_limit>N/A</min_power_limit>
			<max_power_limit>N/A</max_power_limit>
		</module_power_readings>
		<power_smoothing>N/A</power_smoothing>
		<power_profiles>
			<power_profile_requested_profiles>N/A</power_profile_requested_profiles>
			<power_profile_enforced_profiles>N/A</power_profile_enforced_profiles>
		</power_profiles>
		<clocks>
			<graphics_clock>1980 MHz</graphics_clock>
			<sm_clock>1980 MHz</sm_clock>
			<mem_clock>3201 MHz</mem_clock>
			<video_clock>1545 MHz</video_clock>
		</clocks>
		<applications_clocks>
			<graphics_clock>1980 MHz</graphics_clock>
			<mem_clock>3201 MHz</mem_clock>
		</applications_clocks>
		<default_applications_clocks>
			<graphics_clock>1980 MHz</graphics_clock>
			<mem_clock>3201 MHz</mem_clock>
		</default_applications_clocks>
		<deferred_clocks>
			<mem_clock>N/A</mem_clock>
		</deferred_clocks>
		<max_clocks>
			<graphics_clock>1980 MHz</graphics_clock>
			<sm_clock>1980 MHz</sm_clock>
			<mem_clock>3201 MHz</mem_clock>
			<video_clock>1545 MHz</video_clock>
		</max_clocks>
		<max_customer_boost_clocks>
			<graphics_clock>1980 MHz</graphics_clock>
		</max_customer_boost_clocks>
		<clock_policy>
			<auto_boost>N/A</auto_boost>
			<auto_boost_default>N/A</auto_boost_default>
		</clock_policy>
		<fabric>
			<state>N/A</state>
			<status>N/A</status>
			<cliqueId>N/A</cliqueId>
			<clusterUuid>N/A</clusterUuid>
			<health>
				<summary>N/A</summary>
				<bandwidth>N/A</bandwidth>
				<route_recovery_in_progress>N/A</route_recovery_in_progress>
				<route_unhealthy>N/A</route_unhealthy>
				<access_timeout_recovery>N/A</access_timeout_recovery>
				<incorrect_configuration>N/A</incorrect_configuration>
				<partition_assigned>N/A</partition_assigned>
			</health>
		</fabric>
		<supported_clocks>
			<supported_mem_clock>
				<value>3201 MHz</value>
				<supported_graphics_clock>1980 MHz</supported_graphics_clock>
				<supported_graphics_clock>1965 MHz</supported_graphics_clock>
				<supported_graphics_clock>1950 MHz</supported_graphics_clock>
				<supported_graphics_clock>1935 MHz</supported_graphics_clock>
				<supported_graphics_clock>1920 MHz</supported_graphics_clock>
				<supported_graphics_clock>1905 MHz</supported_graphics_clock>
				<supported_graphics_clock>1890 MHz</supported_graphics_clock>
				<supported_graphics_clock>1875 MHz</supported_graphics_clock>
				<supported_graphics_clock>1860 MHz</supported_graphics_clock>
				<supported_graphics_clock>1845 MHz</supported_graphics_clock>
				<supported_graphics_clock>1830 MHz</supported_graphics_clock>
				<supported_graphics_clock>1815 MHz</supported_graphics_clock>
				<supported_graphics_clock>1800 MHz</supported_graphics_clock>
				<supported_graphics_clock>1785 MHz</supported_graphics_clock>
				<supported_graphics_clock>1770 MHz</supported_graphics_clock>
				<supported_graphics_clock>1755 MHz</supported_graphics_clock>
				<supported_graphics_clock>1740 MHz</supported_graphics_clock>
				<supported_graphics_clock>1725 MHz</supported_graphics_clock>
				<supported_graphics_clock>1710 MHz</supported_graphics_clock>
				<supported_graphics_clock>1695 MHz</supported_graphics_clock>
				<supported_graphics_clock>1680 MHz</supported_graphics_clock>
				<supported_graphics_clock>1665 MHz</supported_graphics_clock>
				<supported_graphics_clock>1650 MHz</supported_graphics_clock>
				<supported_graphics_clock>1635 MHz</supported_graphics_clock>
				<supported_graphics_clock>1620 MHz</supported_graphics_clock>
				<supported_graphics_clock>1605 MHz</supported_graphics_clock>
				<supported_graphics_clock>1590 MHz</supported_graphics_clock>
				<supported_graphics_clock>1575 MHz</supported_graphics_clock>
				<supported_graphics_clock>1560 MHz</supported_graphics_clock>
				<supported_graphics_clock>1545 MHz</supported_graphics_clock>
				<supported_graphics_clock>1530 MHz</supported_graphics_clock>
				<supported_graphics_clock>1515 MHz</supported_graphics_clock>
				<supported_graphics_clock>1500 MHz</supported_graphics_clock>
				<supported_graphics_clock>1485 MHz</supported_graphics_clock>
				<supported_graphics_clock>1470 MHz</supported_graphics_clock>
				<supported_graphics_clock>1455 MHz</supported_graphics_clock>
				<supported_graphics_clock>1440 MHz</supported_graphics_clock>
				<supported_graphics_clock>1425 MHz</supported_graphics_clock>
				<supported_graphics_clock>1410 MHz</supported_graphics_clock>
				<supported_graphics_clock>1395 MHz</supported_graphics_clock>
				<supported_graphics_clock>1380 MHz</supported_graphics_clock>
				<supported_graphics_clock>1365 MHz</supported_graphics_clock>
				<supported_graphics_clock>1350 MHz</supported_graphics_clock>
				<supported_graphics_clock>1335 MHz</supported_graphics_clock>
				<supported_graphics_clock>1320 MHz</supported_graphics_clock>
				<supported_graphics_clock>1305 MHz</supported_graphics_clock>
				<supported_graphics_clock>1290 MHz</supported_graphics_clock>
				<supported_graphics_clock>1275 MHz</supported_graphics_clock>
				<supported_graphics_clock>1260 MHz</supported_graphics_clock>
				<supported_graphics_clock>1245 MHz</supported_graphics_clock>
				<supported_graphics_clock>1230 MHz</supported_graphics_clock>
				<supported_graphics_clock>1215 MHz</supported_graphics_clock>
				<supported_graphics_clock>1200 MHz</supported_graphics_clock>
				<supported_graphics_clock>1185 MHz</supported_graphics_clock>
				<supported_graphics_clock>1170 MHz</supported_graphics_clock>
				<supported_graphics_clock>1155 MHz</supported_graphics_clock>
				<supported_graphics_clock>1140 MHz</supported_graphics_clock>
				<supported_graphics_clock>1125 MHz</supported_graphics_clock>
				<supported_graphics_clock>1110 MHz</supported_graphics_clock>
				<supported_graphics_clock>1095 MHz</supported_graphics_clock>
				<supported_graphics_clock>1080 MHz</supported_graphics_clock>
				<supported_graphics_clock>1065 MHz</supported_graphics_clock>
				<supported_graphics_clock>1050 MHz</supported_graphics_clock>
				<supported_graphics_clock>1035 MHz</supported_graphics_clock>
				<supported_graphics_clock>1020 MHz</supported_graphics_clock>
				<supported_graphics_clock>1005 MHz</supported_graphics_clock>
				<supported_graphics_clock>990 MHz</supported_graphics_clock>
				<supported_graphics_clock>975 MHz</supported_graphics_clock>
				<supported_graphics_clock>960 MHz</supported_graphics_clock>
				<supported_graphics_clock>945 MHz</supported_graphics_clock>
				<supported_graphics_clock>930 MHz</supported_graphics_clock>
				<supported_graphics_clock>915 MHz</supported_graphics_clock>
				<supported_graphics_clock>900 MHz</supported_graphics_clock>
				<supported_graphics_clock>885 MHz</supported_graphics_clock>
				<supported_graphics_clock>870 MHz</supported_graphics_clock>
				<supported_graphics_clock>855 MHz</supported_graphics_clock>
				<supported_graphics_clock>840 MHz</supported_graphics_clock>
				<supported_graphics_clock>825 MHz</supported_graphics_clock>
				<supported_graphics_clock>810 MHz</supported_graphics_clock>
				<supported_graphics_clock>795 MHz</supported_graphics_clock>
				<supported_graphics_clock>780 MHz</supported_graphics_clock>
				<supported_graphics_clock>765 MHz</supported_graphics_clock>
				<supported_graphics_clock>750 MHz</supported_graphics_clock>
				<supported_graphics_clock>735 MHz</supported_graphics_clock>
				<supported_graphics_clock>720 MHz</supported_graphics_clock>
				<supported_graphics_clock>705 MHz</supported_graphics_clock>
				<supported_graphics_clock>690 MHz</supported_graphics_clock>
				<supported_graphics_clock>675 MHz</supported_graphics_clock>
				<supported_graphics_clock>660 MHz</supported_graphics_clock>
				<supported_graphics_clock>645 MHz</supported_graphics_clock>
				<supported_graphics_clock>630 MHz</supported_graphics_clock>
				<supported_graphics_clock>615 MHz</supported_graphics_clock>
				<supported_graphics_clock>600 MHz</supported_graphics_clock>
				<supported_graphics_clock>585 MHz</supported_graphics_clock>
				<supported_graphics_clock>570 MHz</supported_graphics_clock>
				<supported_graphics_clock>555 MHz</supported_graphics_clock>
				<supported_graphics_clock>540 MHz</supported_graphics_clock>
				<supported_graphics_clock>525 MHz</supported_graphics_clock>
				<supported_graphics_clock>510 MHz</supported_graphics_clock>
				<supported_graphics_clock>495 MHz</supported_graphics_clock>
				<supported_graphics_clock>480 MHz</supported_graphics_clock>
				<supported_graphics_clock>465 MHz</supported_graphics_clock>
				<supported_graphics_clock>450 MHz</supported_graphics_clock>
				<supported_graphics_clock>435 MHz</supported_graphics_clock>
				<supported_graphics_clock>420 MHz</supported_graphics_clock>
				<supported_graphics_clock>405 MHz</supported_graphics_clock>
				<supported_graphics_clock>390 MHz</supported_graphics_clock>
				<supported_graphics_clock>375 MHz</supported_graphics_clock>
				<supported_graphics_clock>360 MHz</supported_graphics_clock>
				<supported_graphics_clock>345 MHz</supported_graphics_clock>
			</supported_mem_clock>
			<supported_mem_clock>
				<value>2201 MHz</value>
				<supported_graphics_clock>1980 MHz</supported_graphics_clock>
				<supported_graphics_clock>1965 MHz</supported_graphics_clock>
				<supported_graphics_clock>1950 MHz</supported_graphics_clock>
				<supported_graphics_clock>1935 MHz</supported_graphics_clock>
				<supported_graphics_clock>1920 MHz</supported_graphics_clock>
				<supported_graphics_clock>1905 MHz</supported_graphics_clock>
				<supported_graphics_clock>1890 MHz</supported_graphics_clock>
				<supported_graphics_clock>1875 MHz</supported_graphics_clock>
				<supported_graphics_clock>1860 MHz</supported_graphics_clock>
				<supported_graphics_clock>1845 MHz</supported_graphics_clock>
				<supported_graphics_clock>1830 MHz</supported_graphics_clock>
				<supported_graphics_clock>1815 MHz</supported_graphics_clock>
				<supported_graphics_clock>1800 MHz</supported_graphics_clock>
				<supported_graphics_clock>1785 MHz</supported_graphics_clock>
				<supported_graphics_clock>1770 MHz</supported_graphics_clock>
				<supported_graphics_clock>1755 MHz</supported_graphics_clock>
				<supported_graphics_clock>1740 MHz</supported_graphics_clock>
				<supported_graphics_clock>1725 MHz</supported_graphics_clock>
				<supported_graphics_clock>1710 MHz</supported_graphics_clock>
				<supported_graphics_clock>1695 MHz</supported_graphics_clock>
				<supported_graphics_clock>1680 MHz</supported_graphics_clock>
				<supported_graphics_clock>1665 MHz</supported_graphics_clock>
				<supported_graphics_clock>1650 MHz</supported_graphics_clock>
				<supported_graphics_clock>1635 MHz</supported_graphics_clock>
				<supported_graphics_clock>1620 MHz</supported_graphics_clock>
				<supported_graphics_clock>1605 MHz</supported_graphics_clock>
				<supported_graphics_clock>1590 MHz</supported_graphics_clock>
				<supported_graphics_clock>1575 MHz</supported_graphics_clock>
				<supported_graphics_clock>1560 MHz</supported_graphics_clock>
				<supported_graphics_clock>1545 MHz</supported_graphics_clock>
				<supported_graphics_clock>1530 MHz</supported_graphics_clock>
				<supported_graphics_clock>1515 MHz</supported_graphics_clock>
				<supported_graphics_clock>1500 MHz</supported_graphics_clock>
				<supported_graphics_clock>1485 MHz</supported_graphics_clock>
				<supported_graphics_clock>1470 MHz</supported_graphics_clock>
				<supported_graphics_clock>1455 MHz</supported_graphics_clock>
				<supported_graphics_clock>1440 MHz</supported_graphics_clock>
				<supported_graphics_clock>1425 MHz</supported_graphics_clock>
				<supported_graphics_clock>1410 MHz</supported_graphics_clock>
				<supported_graphics_clock>1395 MHz</supported_graphics_clock>
				<supported_graphics_clock>1380 MHz</supported_graphics_clock>
				<supported_graphics_clock>1365 MHz</supported_graphics_clock>
				<supported_graphics_clock>1350 MHz</supported_graphics_clock>
				<supported_graphics_clock>1335 MHz</supported_graphics_clock>
				<supported_graphics_clock>1320 MHz</supported_graphics_clock>
				<supported_graphics_clock>1305 MHz</supported_graphics_clock>
				<supported_graphics_clock>1290 MHz</supported_graphics_clock>
				<supported_graphics_clock>1275 MHz</supported_graphics_clock>
				<supported_graphics_clock>1260 MHz</supported_graphics_clock>
				<supported_graphics_clock>1245 MHz</supported_graphics_clock>
				<supported_graphics_clock>1230 MHz</supported_graphics_clock>
				<supported_graphics_clock>1215 MHz</supported_graphics_clock>
				<supported_graphics_clock>1200 MHz</supported_graphics_clock>
				<supported_graphics_clock>1185 MHz</supported_graphics_clock>
				<supported_graphics_clock>1170 MHz</supported_graphics_clock>
				<supported_graphics_clock>1155 MHz</supported_graphics_clock>
				<supported_graphics_clock>1140 MHz</supported_graphics_clock>
				<supported_graphics_clock>1125 MHz</supported_graphics_clock>
				<supported_graphics_clock>1110 MHz</supported_graphics_clock>
				<supported_graphics_clock>1095 MHz</supported_graphics_clock>
				<supported_graphics_clock>1080 MHz</supported_graphics_clock>
				<supported_graphics_clock>1065 MHz</supported_graphics_clock>
				<supported_graphics_clock>1050 MHz</supported_graphics_clock>
				<supported_graphics_clock>1035 MHz</supported_graphics_clock>
				<supported_graphics_clock>1020 MHz</supported_graphics_clock>
				<supported_graphics_clock>1005 MHz</supported_graphics_clock>
				<supported_graphics_clock>990 MHz</supported_graphics_clock>
				<supported_graphics_clock>975 MHz</supported_graphics_clock>
				<supported_graphics_clock>960 MHz</supported_graphics_clock>
				<supported_graphics_clock>945 MHz</supported_graphics_clock>
				<supported_graphics_clock>930 MHz</supported_graphics_clock>
				<supported_graphics_clock>915 MHz</supported_graphics_clock>
				<supported_graphics_clock>900 MHz</supported_graphics_clock>
				<supported_graphics_clock>885 MHz</supported_graphics_clock>
				<supported_graphics_clock>870 MHz</supported_graphics_clock>
				<supported_graphics_clock>855 MHz</supported_graphics_clock>
				<supported_graphics_clock>840 MHz</supported_graphics_clock>
				<supported_graphics_clock>825 MHz</supported_graphics_clock>
				<supported_graphics_clock>810 MHz</supported_graphics_clock>
				<supported_graphics_clock>795 MHz</supported_graphics_clock>
				<supported_graphics_clock>780 MHz</supported_graphics_clock>
				<supported_graphics_clock>765 MHz</supported_graphics_clock>
				<supported_graphics_clock>750 MHz</supported_graphics_clock>
				<supported_graphics_clock>735 MHz</supported_graphics_clock>
				<supported_graphics_clock>720 MHz</supported_graphics_clock>
				<supported_graphics_clock>705 MHz</supported_graphics_clock>
				<supported_graphics_clock>690 MHz</supported_graphics_clock>
				<supported_graphics_clock>675 MHz</supported_graphics_clock>
				<supported_graphics_clock>660 MHz</supported_graphics_clock>
				<supported_graphics_clock>645 MHz</supported_graphics_clock>
				<supported_graphics_clock>630 MHz</supported_graphics_clock>
				<supported_graphics_clock>615 MHz</supported_graphics_clock>
				<supported_graphics_clock>600 MHz</supported_graphics_clock>
				<supported_graphics_clock>585 MHz</supported_graphics_clock>
				<supported_graphics_clock>570 MHz</supported_graphics_clock>
				<supported_graphics_clock>555 MHz</supported_graphics_clock>
				<supported_graphics_clock>540 MHz</supported_graphics_clock>
				<supported_graphics_clock>525 MHz</supported_graphics_clock>
				<supported_graphics_clock>510 MHz</supported_graphics_clock>
				<supported_graphics_clock>495 MHz</supported_graphics_clock>
				<supported_graphics_clock>480 MHz</supported_graphics_clock>
				<supported_graphics_clock>465 MHz</supported_graphics_clock>
				<supported_graphics_clock>450 MHz</supported_graphics_clock>
				<supported_graphics_clock>435 MHz</supported_graphics_clock>
				<supported_graphics_clock>420 MHz</supported_graphics_clock>
				<supported_graphics_clock>405 MHz</supported_graphics_clock>
				<supported_graphics_clock>390 MHz</supported_graphics_clock>
				<supported_graphics_clock>375 MHz</supported_graphics_clock>
				<supported_graphics_clock>360 MHz</supported_graphics_clock>
				<supported_graphics_clock>345 MHz</supported_graphics_clock>
			</supported_mem_clock>
		</supported_clocks>
		<processes>
			<process_info>
				<gpu_instance_id>N/A</gpu_instance_id>
				<compute_instance_id>N/A</compute_instance_id>
				<pid>511</pid>
				<type>C</type>
				<process_name>python3</process_name>
				<used_memory>2146 MiB</used_memory>
			</process_info>
		</processes>
		<accounted_processes>
		</accounted_processes>
		<capabilities>
			<egm>disabled</egm>
		</capabilities>
	</gpu>

</nvidia_smi_log>
'''


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def parse(tmp_path, text: str, expect: str, name: str = "rec.txt", opts: Options | None = None):
    path = tmp_path / name
    path.write_text(text)
    return parse_file(path, opts or Options(tz="UTC"), expect=expect)[1]


def test_query_gpu_csv_with_reserved_column(tmp_path):
    p = parse(tmp_path, CSV_TXT, "nvidia-smi-csv")
    r = p.samples.row(0, named=True)
    assert (r["gpu"], r["bytes"], r["total_bytes"]) == ("0", 0, 143771 * MiB)
    assert r["time"] == utc(2026, 11, 30, 4, 57, 38, 163000)
    assert p.meta["gpu_map"] == {UUID: "0", BUS: "0"}
    assert p.meta["gpus"][0]["name"] == "NVIDIA H200"


def test_noheader_nounits_loop_columns_inferred_from_their_values(tmp_path):
    # `--query-gpu=timestamp,index,memory.used,memory.total --format=csv,noheader,nounits`: the
    # per-GPU constant of at least 1 GiB is the total; the other column reads 0 on the idle GPU
    p = parse(tmp_path, CSV_LOOP_TXT, "nvidia-smi-csv")
    assert p.samples["bytes"].to_list() == [0, 0, 0, 0, 1 * MiB, 113 * MiB, 1643 * MiB]
    assert set(p.samples["total_bytes"]) == {143771 * MiB}
    assert any("inferred from the values" in n and "memory.used" in n for n in p.notes)
    assert p.skipped.total == 0


def test_noheader_nounits_used_and_free_told_apart_by_their_sum(tmp_path):
    # timestamp, index, memory.free, memory.used, memory.total: free + used = total less the
    # driver's reservation; used is the one that is lower on the idle GPU
    rows = "".join(f"2026/11/30 04:57:{s:02d}.000, 0, {143156 - u}, {u}, 143771\n"
                   for s, u in enumerate([0, 0, 555, 1599, 2099, 2699]))
    p = parse(tmp_path, rows, "nvidia-smi-csv")
    assert p.samples["bytes"].to_list() == [u * MiB for u in (0, 0, 555, 1599, 2099, 2699)]


def test_noheader_nounits_used_then_total_is_read(tmp_path):
    # `timestamp,index,memory.used,memory.total` as scripts log it, the GPU never idle: one column that
    # varies below the per-GPU total and comes before it is taken as memory.used, and the note says so
    rows = "".join(f"2026/11/30 04:57:{s:02d}.000, {g}, {u + g}, 143771\n"
                   for s, u in enumerate([90000, 91000, 92000, 93000]) for g in range(2))
    p = parse(tmp_path, rows, "nvidia-smi-csv")
    assert p.samples.filter(pl.col("gpu") == "1")["bytes"].to_list() == [(u + 1) * MiB for u in (90000, 91000, 92000, 93000)]
    assert set(p.samples["series"]) == {"memory.used"} and set(p.samples["total_bytes"]) == {143771 * MiB}
    assert any("taken as memory.used" in n and "--columns" in n for n in p.notes)


def test_noheader_nounits_declared_columns_win(tmp_path):
    # the same rows declared as memory.free: read as memory.free (with its fall below the highest beside it,
    # parsers/free.py), and the notes say the columns were declared
    rows = "".join(f"2026/11/30 04:57:{s:02d}.000, 0, {u}, 143771\n" for s, u in enumerate([90000, 91000, 92000]))
    p = parse(tmp_path, rows, "nvidia-smi-csv",
              opts=Options(tz="UTC", columns=["timestamp", "index", "memory.free", "memory.total"]))
    free = p.samples.filter(pl.col("series") == "memory.free")
    assert free["bytes"].to_list() == [u * MiB for u in (90000, 91000, 92000)]
    assert p.samples.filter(pl.col("series") == "free.fall")["bytes"].to_list() == [2000 * MiB, 1000 * MiB, 0]
    assert any("declared with --columns" in n for n in p.notes)


def test_noheader_nounits_not_guessed_when_the_values_do_not_tell(tmp_path):
    # one bare column after the total could be anything (memory.free, a clock in MHz): not guessed
    rows = "".join(f"2026/11/30 04:57:{s:02d}.000, 0, 143771, {u}\n" for s, u in enumerate([90000, 91000, 92000, 93000]))
    p = parse(tmp_path, rows, "nvidia-smi-csv")
    assert p.samples.height == 0
    assert any("cannot tell" in n for n in p.notes)


def test_compute_apps_with_and_without_header(tmp_path):
    p = parse(tmp_path, APPS_TXT, "nvidia-smi-apps")
    r = p.samples.row(0, named=True)
    assert (r["gpu"], r["pid"], r["bytes"], r["label"]) == (UUID, 414, 1634 * MiB, "python3")
    assert r["time"] == utc(2026, 11, 30, 4, 57, 46, 445000)
    r = parse(tmp_path, APPS_NOHEADER_TXT, "nvidia-smi-apps").samples.row(0, named=True)
    assert (r["pid"], r["bytes"], r["label"]) == (414, 1634 * MiB, "python3")
    after = parse(tmp_path, APPS_AFTER_TXT, "nvidia-smi-apps")
    assert after.samples.height == 0 and after.skipped.total == 0  # the process had exited


def test_dmon_and_pmon(tmp_path):
    d = parse(tmp_path, DMON_TXT, "nvidia-smi-dmon").samples
    assert d["bytes"].to_list() == [1643 * MiB] * 3  # fb, not bar1 (1644)
    assert d["time"].to_list() == [utc(2026, 11, 30, 4, 57, s) for s in (40, 41, 42)]
    pm = parse(tmp_path, PMON_TXT, "nvidia-smi-dmon").samples
    assert pm["pid"].to_list() == [511] * 3 and pm["bytes"].to_list() == [2146 * MiB] * 3
    assert pm["label"].to_list() == ["python3"] * 3 and set(pm["series"]) == {"process.used"}


def test_table(tmp_path):
    p = parse(tmp_path, TABLE_TXT, "nvidia-smi-table")
    mem = p.samples.filter(pl.col("series") == "memory.used").row(0, named=True)
    assert (mem["gpu"], mem["bytes"], mem["total_bytes"]) == ("0", 2155 * MiB, 143771 * MiB)
    assert mem["time"] == utc(2026, 11, 30, 4, 58, 8)
    proc = p.samples.filter(pl.col("series") == "process.used").row(0, named=True)
    assert (proc["pid"], proc["bytes"], proc["label"]) == (511, 2146 * MiB, "python3")
    assert p.meta["gpu_map"] == {BUS: "0"}


def test_query_reports_text_and_xml(tmp_path):
    for text, name in ((Q_TXT, "q.txt"), (QMEM_TXT, "qmem.txt"), (QX_XML, "q.xml")):
        p = parse(tmp_path, text, "nvidia-smi-q", name=name)
        mem = p.samples.filter(pl.col("series") == "memory.used").row(0, named=True)
        assert (mem["gpu"], mem["bytes"], mem["total_bytes"]) == ("0", 2155 * MiB, 143771 * MiB), name
        assert mem["time"] is not None and p.meta["gpu_map"][BUS] == "0"
        procs = p.samples.filter(pl.col("series") == "process.used")
        if name != "qmem.txt":
            assert procs["pid"].to_list() == [511] and procs["bytes"].to_list() == [2146 * MiB], name
            assert p.meta["gpu_map"][UUID] == "0"
        assert 2156 * MiB not in p.samples["bytes"].to_list()  # BAR1 Used is not the frame buffer
