// bandit-sim --env=NAME [--key=value ...] [--out=FILE.json] [--plot=FILE.png]
//
// Abseil flags like every other binary (--help lists them, --flagfile works, an unknown flag is
// an error). Every key an environment reads (bench/sim/*_sim.cc, through SimArgs) is a string
// flag whose help names the environments that read it; left empty it takes the environment's
// own default, which differs between environments (T, d, seeds, ...). A flag that is set but
// not read by the chosen environment is refused.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "bench/sim/sim.h"

ABSL_FLAG(std::string, env, "", "The environment to run (required; --help lists them)");
ABSL_FLAG(std::string, out, "", "Write the JSON here (default: stdout)");
ABSL_FLAG(std::string, plot, "", "Also plot the JSON into this PNG (needs --out)");
ABSL_FLAG(std::string, algos, "", "generators, gp, gp_candidates, stream, stream_budget");
ABSL_FLAG(std::string, arms, "", "bkb_fig2, generators, gp, the GLB envs, vendi_exact, position_bias");
ABSL_FLAG(std::string, bandwidth, "", "bkb_fig2, generators, gp, gp_candidates, vendi_exact");
ABSL_FLAG(std::string, baseline, "", "stream_budget");
ABSL_FLAG(std::string, calib_iters, "", "stream_budget");
ABSL_FLAG(std::string, candidates, "", "gp_candidates");
ABSL_FLAG(std::string, centers, "", "gp_candidates");
ABSL_FLAG(std::string, D, "", "generators, stream, stream_budget");
ABSL_FLAG(std::string, d, "", "generators, gp, gp_candidates, the GLB envs, vendi_exact, position_bias");
ABSL_FLAG(std::string, data, "", "stream, stream_budget");
ABSL_FLAG(std::string, deff, "", "gp_candidates");
ABSL_FLAG(std::string, delta, "", "gp, gp_candidates, the GLB envs");
ABSL_FLAG(std::string, diagnostics, "", "gp");
ABSL_FLAG(std::string, dispersion, "", "the GLB envs");
ABSL_FLAG(std::string, draws, "", "vendi_exact");
ABSL_FLAG(std::string, eg_steps, "", "vendi_exact");
ABSL_FLAG(std::string, env_seed, "", "generators, vendi_exact");
ABSL_FLAG(std::string, eps, "", "generators, the GLB envs");
ABSL_FLAG(std::string, epsilon, "", "gp, gp_candidates");
ABSL_FLAG(std::string, equal_time, "", "stream_budget");
ABSL_FLAG(std::string, eta, "", "generators");
ABSL_FLAG(std::string, eta_constant, "", "stream, stream_budget");
ABSL_FLAG(std::string, eval_D, "", "generators");
ABSL_FLAG(std::string, eval_kernel, "", "generators");
ABSL_FLAG(std::string, evals, "", "bkb_fig2");
ABSL_FLAG(std::string, exact_rows, "", "stream");
ABSL_FLAG(std::string, f_bound, "", "gp, gp_candidates");
ABSL_FLAG(std::string, fidelity, "", "generators");
ABSL_FLAG(std::string, fidelity_k, "", "generators");
ABSL_FLAG(std::string, fidelity_ref, "", "generators");
ABSL_FLAG(std::string, fidelity_weight, "", "generators");
ABSL_FLAG(std::string, first_seed, "", "gp_candidates");
ABSL_FLAG(std::string, gamma, "", "the GLB envs");
ABSL_FLAG(std::string, hi, "", "bkb_fig2");
ABSL_FLAG(std::string, lambda, "", "gp, gp_candidates, the GLB envs");
ABSL_FLAG(std::string, lambda_scales, "", "stream");
ABSL_FLAG(std::string, lazy_every, "", "gp_candidates");
ABSL_FLAG(std::string, linucb_alpha, "", "the GLB envs");
ABSL_FLAG(std::string, lo, "", "bkb_fig2");
ABSL_FLAG(std::string, loss, "", "stream, stream_budget");
ABSL_FLAG(std::string, M, "", "generators");
ABSL_FLAG(std::string, master_order, "", "the GLB envs");
ABSL_FLAG(std::string, mode_radius, "", "generators");
ABSL_FLAG(std::string, mode_sd, "", "generators");
ABSL_FLAG(std::string, nnz, "", "the GLB envs");
ABSL_FLAG(std::string, noise, "", "bkb_fig2, gp, gp_candidates");
ABSL_FLAG(std::string, objective, "", "generators");
ABSL_FLAG(std::string, per_arm, "", "vendi_exact");
ABSL_FLAG(std::string, permutations, "", "stream, stream_budget");
ABSL_FLAG(std::string, points, "", "generators");
ABSL_FLAG(std::string, pop_n, "", "generators");
ABSL_FLAG(std::string, proj_steps, "", "the GLB envs");
ABSL_FLAG(std::string, q_bar, "", "bkb_fig2, gp, gp_candidates");
ABSL_FLAG(std::string, radius, "", "the GLB envs");
ABSL_FLAG(std::string, radius_multiplier, "", "gp, gp_candidates");
ABSL_FLAG(std::string, ref_n, "", "generators");
ABSL_FLAG(std::string, region_grid, "", "the GLB envs");
ABSL_FLAG(std::string, reward_bound, "", "the GLB envs");
ABSL_FLAG(std::string, rf_map, "", "stream_budget");
ABSL_FLAG(std::string, rows, "", "stream, stream_budget");
ABSL_FLAG(std::string, Rs, "", "vendi_exact");
ABSL_FLAG(std::string, S, "", "generators, the GLB envs");
ABSL_FLAG(std::string, seed, "", "bkb_fig2, stream, stream_budget");
ABSL_FLAG(std::string, seeds, "", "generators, gp, gp_candidates, the GLB envs, position_bias");
ABSL_FLAG(std::string, slots, "", "position_bias");
ABSL_FLAG(std::string, sigmas, "", "stream");
ABSL_FLAG(std::string, sizes, "", "stream_budget");
ABSL_FLAG(std::string, T, "", "generators, gp, gp_candidates, the GLB envs, position_bias");
ABSL_FLAG(std::string, u, "", "stream, stream_budget");
ABSL_FLAG(std::string, ucb_beta, "", "generators");
ABSL_FLAG(std::string, ucb_delta, "", "generators");
ABSL_FLAG(std::string, window, "", "the GLB envs");

namespace {

using bandit::sim::RegisteredEnvs;
using bandit::sim::SimArgs;

struct EnvFlag {
  const char* key;
  absl::Flag<std::string>* flag;
};

// Every environment key, by the name SimArgs reads it under.
const EnvFlag kEnvFlags[] = {
    {"env", &FLAGS_env},
    {"out", &FLAGS_out},
    {"plot", &FLAGS_plot},
    {"algos", &FLAGS_algos},
    {"arms", &FLAGS_arms},
    {"bandwidth", &FLAGS_bandwidth},
    {"baseline", &FLAGS_baseline},
    {"calib_iters", &FLAGS_calib_iters},
    {"candidates", &FLAGS_candidates},
    {"centers", &FLAGS_centers},
    {"D", &FLAGS_D},
    {"d", &FLAGS_d},
    {"nnz", &FLAGS_nnz},
    {"data", &FLAGS_data},
    {"deff", &FLAGS_deff},
    {"delta", &FLAGS_delta},
    {"diagnostics", &FLAGS_diagnostics},
    {"dispersion", &FLAGS_dispersion},
    {"draws", &FLAGS_draws},
    {"eg_steps", &FLAGS_eg_steps},
    {"env_seed", &FLAGS_env_seed},
    {"eps", &FLAGS_eps},
    {"epsilon", &FLAGS_epsilon},
    {"equal_time", &FLAGS_equal_time},
    {"eta", &FLAGS_eta},
    {"eta_constant", &FLAGS_eta_constant},
    {"eval_D", &FLAGS_eval_D},
    {"eval_kernel", &FLAGS_eval_kernel},
    {"evals", &FLAGS_evals},
    {"exact_rows", &FLAGS_exact_rows},
    {"f_bound", &FLAGS_f_bound},
    {"fidelity", &FLAGS_fidelity},
    {"fidelity_k", &FLAGS_fidelity_k},
    {"fidelity_ref", &FLAGS_fidelity_ref},
    {"fidelity_weight", &FLAGS_fidelity_weight},
    {"first_seed", &FLAGS_first_seed},
    {"gamma", &FLAGS_gamma},
    {"hi", &FLAGS_hi},
    {"lambda", &FLAGS_lambda},
    {"lambda_scales", &FLAGS_lambda_scales},
    {"lazy_every", &FLAGS_lazy_every},
    {"linucb_alpha", &FLAGS_linucb_alpha},
    {"lo", &FLAGS_lo},
    {"loss", &FLAGS_loss},
    {"M", &FLAGS_M},
    {"master_order", &FLAGS_master_order},
    {"mode_radius", &FLAGS_mode_radius},
    {"mode_sd", &FLAGS_mode_sd},
    {"noise", &FLAGS_noise},
    {"objective", &FLAGS_objective},
    {"per_arm", &FLAGS_per_arm},
    {"permutations", &FLAGS_permutations},
    {"points", &FLAGS_points},
    {"pop_n", &FLAGS_pop_n},
    {"proj_steps", &FLAGS_proj_steps},
    {"q_bar", &FLAGS_q_bar},
    {"radius", &FLAGS_radius},
    {"radius_multiplier", &FLAGS_radius_multiplier},
    {"ref_n", &FLAGS_ref_n},
    {"region_grid", &FLAGS_region_grid},
    {"reward_bound", &FLAGS_reward_bound},
    {"rf_map", &FLAGS_rf_map},
    {"rows", &FLAGS_rows},
    {"Rs", &FLAGS_Rs},
    {"S", &FLAGS_S},
    {"seed", &FLAGS_seed},
    {"seeds", &FLAGS_seeds},
    {"slots", &FLAGS_slots},
    {"sigmas", &FLAGS_sigmas},
    {"sizes", &FLAGS_sizes},
    {"T", &FLAGS_T},
    {"u", &FLAGS_u},
    {"ucb_beta", &FLAGS_ucb_beta},
    {"ucb_delta", &FLAGS_ucb_delta},
    {"window", &FLAGS_window},
};

std::string UsageText() {
  std::string text =
      "bandit-sim --env=NAME [--key=value ...] [--out=FILE.json] [--plot=FILE.png]\n"
      "environment keys left empty take the environment's default.\nenvironments:\n";
  for (const auto& e : RegisteredEnvs())
    absl::StrAppend(&text, "  ", e.env, "  ", e.description, "\n");
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(UsageText());
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::cerr << "bandit-sim: unexpected argument '" << positional[1] << "', expected --key=value\n"
              << UsageText();
    return 2;
  }
  std::map<std::string, std::string> values;
  for (const EnvFlag& f : kEnvFlags) {
    std::string value = absl::GetFlag(*f.flag);
    if (!value.empty()) values[f.key] = std::move(value);
  }
  const SimArgs args(std::move(values));
  const std::string env = args.String("env", "");
  const std::string out = args.String("out", "");
  const std::string plot = args.String("plot", "");
  if (env.empty()) {
    std::cerr << "bandit-sim: --env is required\n" << UsageText();
    return 2;
  }
  for (const auto& e : RegisteredEnvs()) {
    if (e.env != env) continue;
    auto result = e.run(env, args);
    if (!result.ok()) {
      std::cerr << "bandit-sim: " << result.status().message() << "\n";
      return 2;
    }
    if (auto unused = args.Unused(); !unused.empty()) {
      for (const auto& k : unused)
        std::cerr << "bandit-sim: --" << k << " is not read by --env=" << env << "\n";
      return 2;
    }
    const std::string text = result->dump(1);
    if (out.empty()) {
      std::cout << text << "\n";
    } else {
      std::ofstream f(out);
      f << text << "\n";
      if (!f) {
        std::cerr << "bandit-sim: cannot write " << out << "\n";
        return 1;
      }
    }
    if (!plot.empty()) {
      if (out.empty()) {
        std::cerr << "bandit-sim: --plot needs --out\n";
        return 2;
      }
      const char* src = std::getenv("BANDIT_SOURCE_DIR");
      const std::string script = absl::StrCat(src ? src : ".", "/bench/plot_sim.py");
      const std::string cmd =
          absl::StrCat("/usr/bin/python3 '", script, "' '", out, "' '", plot, "'");
      if (std::system(cmd.c_str()) != 0) {
        std::cerr << "bandit-sim: plotting failed: " << cmd << "\n";
        return 1;
      }
    }
    return 0;
  }
  std::cerr << "bandit-sim: unknown --env=" << env << "\n" << UsageText();
  return 2;
}
