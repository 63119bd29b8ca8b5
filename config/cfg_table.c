/* placeholder */ typedef int cfg_table_placeholder_;
