/* placeholder */ typedef int cfg_placeholder_;
